/**
 * The decoder-level checks gpu.html exposes: parity cases (random reference model now,
 * the shipped model's golden fixtures when they exist), per-step resource counters,
 * and the context-too-long error.
 */
import { ContextTooLongError } from '../../src/errors.js';
import { kvHeadCount, parseConfig } from '../../src/model/config.js';
import { referenceConfig, randomDecoderWeights, randomEmbeddings } from '../../src/model/testing.js';
import { loadDecoderWeights } from '../../src/model/weights.js';
import { SafeTensors } from '../../src/model/safetensors.js';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.js';
import { benchWebGpu } from '../../src/backend/webgpu/bench.js';
import { runParity, type ParityCase } from './gpu-decoder.js';
import { gpu, type CheckResult } from './gpu-util.js';

function randomCase(name: string, audioLength: number, steps: number): ParityCase {
  const config = referenceConfig();
  return { name, config, weights: randomDecoderWeights(config, 1), audio: randomEmbeddings(config, audioLength, 2), steps, mode: 'policy' };
}

const SHIPPED = '/models/wnw-ref';

/** The shipped model and one golden clip, or null while they are not there yet. */
async function shippedCase(clip: number, mode: ParityCase['mode']): Promise<ParityCase | null> {
  const get = async (f: string) => {
    const r = await fetch(`${SHIPPED}/${f}`);
    return r.ok && !(r.headers.get('content-type') ?? '').includes('text/html') ? r : null;
  };
  const [cfgR, wR, fxR] = await Promise.all([get('config.json'), get('decoder.safetensors'), get(`fixtures/clip${clip}.safetensors`)]);
  if (!cfgR || !wR || !fxR) return null;
  const config = parseConfig(await cfgR.json(), `${SHIPPED}/config.json`);
  const weights = loadDecoderWeights(config, await wR.arrayBuffer(), `${SHIPPED}/decoder.safetensors`);
  const fx = new SafeTensors(await fxR.arrayBuffer(), `clip${clip}.safetensors`);
  const tokens = fx.i32('tokens');
  const audio = fx.f32('embeddings');
  // The fixture's prompt must be our layout: [bos][audio (-1)][instruction].
  const prompt = Array.from(fx.i32('prompt'));
  const A = audio.length / config.hiddenSize;
  const ours = [config.tokens.bos, ...new Array<number>(A).fill(-1), ...config.instruction];
  if (prompt.join(',') !== ours.join(',')) throw new Error(`clip${clip}: fixture prompt layout differs from [bos][audio x ${A}][instruction]`);
  return { name: `shipped clip${clip}`, config, weights, audio, steps: 64, mode, golden: { tokens, logits: fx.f32('logits') } };
}

async function parityOf(make: () => Promise<ParityCase | null>, name: string): Promise<CheckResult> {
  const pc = await make();
  if (!pc) return { name, pass: true, detail: 'SKIP: model or fixture not present', ms: 0 };
  return runParity(pc);
}

/** Resource counters across steps of a session with exports, recalls and releases. */
async function contextTooLong(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const config = referenceConfig();
  // A 64 MiB binding cap: 90 minutes of prompt queries (143 MB) cannot be bound.
  const b = await WebGpuBackend.create(config, randomDecoderWeights(config, 3), { context: ctx, kvBudgetBytes: 2 ** 20, maxBindingBytes: 64 * 2 ** 20 });
  const before = ctx.liveBuffers;
  const request = { decodeHeads: [], prefillQueries: 3 };
  let err: unknown = null;
  try {
    // 90 minutes of audio: refused before any buffer is made.
    b.begin({ audioLength: 70_000, maxNewTokens: 10, request });
  } catch (e) {
    err = e;
  }
  const tooLong = err instanceof ContextTooLongError && err.neededBytes > 0 && err.limit === 'prompt-binding';
  const created = ctx.liveBuffers - before;
  // Over the budget at applyPrefill: a full plan for 300 tokens in 32 heads needs ~2.7 MiB.
  let err2: unknown = null;
  const A = 300;
  b.begin({ audioLength: A, maxNewTokens: 4, request });
  try {
    const all = Int32Array.from({ length: A }, (_, i) => i);
    await b.prefill(randomEmbeddings(config, A, 4));
    await b.applyPrefill({ heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })) });
  } catch (e) {
    err2 = e;
  }
  b.dispose();
  const budget = err2 instanceof ContextTooLongError;
  const pass = tooLong && created === 0 && budget;
  const detail = `begin(70k tokens): ${tooLong ? 'ContextTooLongError' : String(err)} (${(err as Error)?.message ?? ''}); buffers created before the error: ${created}; full plan over a 1 MiB budget: ${budget ? 'ContextTooLongError' : String(err2)} (${(err2 as Error)?.message ?? ''})`;
  return { name: 'context_too_long', pass, detail, ms: performance.now() - t0 };
}

/** The bench entry the CLI calls, on a short clip: it runs and reports sane numbers. */
async function benchSmoke(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const config = referenceConfig();
  const r = await benchWebGpu(config, randomDecoderWeights(config, 5), 200, { context: ctx, steps: 6 });
  const pass = r.submitsPerStep === 1 && r.dispatchesPerStep === 1 + 8 * config.numLayers + 3 && r.decodeMsPerToken > 0 && r.prefillTokensPerSecond > 0;
  return { name: 'bench_smoke', pass, detail: JSON.stringify(r), ms: performance.now() - t0 };
}

export const decoderTests: Record<string, () => Promise<CheckResult>> = {
  parity_quick: () => runParity(randomCase('random reference model (quick)', 150, 12)),
  parity_reference_random: () => runParity(randomCase('random reference model', 1024, 64)),
  // A 2.5 MiB binding cap (the prompt's queries take 2.1 MB): the plan's K pages, about
  // 1.5 MB per layer, need a K/V pair per layer or two, and the prefill's QKV and MLP run
  // in two row blocks; the same plans as above.
  parity_sharded_pool: () => runParity({
    ...randomCase('random reference model, sharded pool, prefill in blocks', 1024, 64),
    backend: { maxBindingBytes: 2.5 * 2 ** 20 },
    layout: { minShards: 3, prefillBlocks: 2 },
  }),
  // An f16 pool on both backends (the CPU rounds what it stores as the GPU packs it).
  parity_f16_pool: () => runParity({ ...randomCase('random reference model, f16 KV pool', 1024, 64), backend: { kvPrecision: 'f16' } }),
  // clip1: full cache, both backends against the golden tokens and logits;
  // clip2: the policy-like plans on the real model (golden only before the first plan).
  parity_shipped_clip1: () => parityOf(() => shippedCase(1, 'full'), 'parity_shipped_clip1'),
  parity_shipped_clip2: () => parityOf(() => shippedCase(2, 'policy'), 'parity_shipped_clip2'),
  context_too_long: contextTooLong,
  bench_smoke: benchSmoke,
};
