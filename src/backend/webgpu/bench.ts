/**
 * A benchmark entry the CLI's `npm run bench` calls: prefill tokens/s and decode
 * ms/token (median of N steps) for one audio length, with the full-cache plan, plus
 * dispatches and submits per step. On a software adapter the numbers are CPU numbers
 * (`software: true`): compare methods as ratios within one run, never as GPU speed.
 */
import type { ModelConfig } from '../../model/config.js';
import { kvHeadCount } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import { randomEmbeddings } from '../../model/testing.js';
import type { PrefillPlan } from '../../kv/plan.js';
import { WebGpuBackend, type WebGpuBackendOptions } from './backend.js';

export interface WebGpuBench {
  backend: string;
  software: boolean;
  audioLength: number;
  promptLength: number;
  prefillMs: number;
  prefillTokensPerSecond: number;
  decodeMsPerToken: number;
  decodeSteps: number;
  dispatchesPerStep: number;
  submitsPerStep: number;
  /** GPU bytes of the session (pool, decode and prefill buffers) and of the weights. */
  sessionBytes: number;
}

export interface BenchOptions extends WebGpuBackendOptions {
  /** Decode steps to time (median reported); default 32. */
  steps?: number;
  /** Reuse a backend (its weights must match `weights`). */
  backend?: WebGpuBackend;
  audio?: Float32Array;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export async function benchWebGpu(
  config: ModelConfig,
  weights: DecoderWeights,
  audioLength: number,
  opts: BenchOptions = {},
): Promise<WebGpuBench> {
  const steps = opts.steps ?? 32;
  const backend = opts.backend ?? (await WebGpuBackend.create(config, weights, opts));
  const request = { decodeHeads: [], prefillQueries: config.instruction.length };
  const session = { audioLength, maxNewTokens: steps + 1, request };
  let stage: { close(): void } | undefined;
  try {
    const sizes = backend.memoryNeed(session);
    const opened = backend.open(session);
    stage = opened;
    const audio = opts.audio ?? randomEmbeddings(config, audioLength, 7);
    const t0 = performance.now();
    const pre = await opened.prefill(audio);
    const prefillMs = performance.now() - t0;
    const all = Int32Array.from({ length: audioLength }, (_, i) => i);
    const plan: PrefillPlan = {
      heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
    };
    const decode = await pre.place(plan);
    let token = pre.token;
    const times: number[] = [];
    let counters = decode.counters();
    for (let i = 0; i < steps; i++) {
      const t = performance.now();
      token = (await decode.step(token)).token;
      times.push(performance.now() - t);
      counters = decode.counters();
    }
    const promptLength = sizes.promptLength;
    return {
      backend: backend.label,
      software: backend.ctx.info.software,
      audioLength,
      promptLength,
      prefillMs,
      prefillTokensPerSecond: promptLength / (prefillMs / 1000),
      decodeMsPerToken: median(times),
      decodeSteps: steps,
      dispatchesPerStep: counters.dispatches,
      submitsPerStep: counters.submits,
      sessionBytes: sizes.prefillBytes + decode.poolLayout().bytes + sizes.decodeBytes,
    };
  } finally {
    stage?.close();
    if (!opts.backend) backend.dispose();
  }
}
