/**
 * One benchmark measurement on one backend: prefill speed and decode step time of the
 * full cache and of a policy, on the same weights and the same audio embeddings, in the
 * same run (so only ratios are compared across machines).
 */
import type { DecoderBackend, SessionOptions, StepCounters } from '../backend/types.js';
import type { PolicyLayout } from '../kv/plan.js';
import type { KvPolicy } from '../policy/types.js';
import { planLagOf } from '../policy/types.js';
import { policyLayout } from '../kv/prompt.js';
import { isStop, kvHeadCount, segmentLength, type ModelConfig } from '../model/config.js';
import { rng } from '../model/testing.js';
import { buildHeadsFile } from '../calibrate/heads-file.js';
import { createPolicy, sharedPrefillWindows } from '../policy/registry.js';
import { wordTimingHeads } from '../policy/timing-heads.js';
import type { PolicyName } from '../index.js';
import type { HeadsFile } from '../model/heads.js';

export interface PolicyTiming {
  policy: PolicyName;
  /** Options beside the budget, as written (`planLag=1`); absent for the policy's defaults. */
  variant?: string;
  budget: number;
  prefillTokensPerSecond: number;
  msPerToken: number;
  rGpu: number;
  mbPerStep: number;
  mbPerStepMax: number;
  gpuKvMiB: number;
  dispatchesPerStep: number;
  submitsPerStep: number;
  /** The loop the steps ran in: step t + 1 queued before step t was read (policy's planLag 2), or waiting for each. */
  pipelined: boolean;
  /** Means over the timed steps (backend stepCounters; 0 where a backend does not count them). */
  dispatchesPerLayer: number;
  /** Reads the CPU awaited with no later step queued on the device (the device idled). */
  cpuWaitsPerStep: number;
  readbackBytesPerStep: number;
  /** Uniforms, token, page tables and recalled rows written to the device. */
  bytesToGpuPerStep: number;
  /** Submits of the KV pool's growth, beside the steps' own. */
  growthSubmits: number;
}

/** How a policy is timed: its options beyond the budget, and whether the loop may pipeline. */
export interface TimingOptions {
  policyOptions?: Record<string, unknown>;
  /** Queue step t + 1 before reading step t where the policy's planLag allows it (default true); false: the waiting loop. */
  pipeline?: boolean;
}

const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

const now = () => performance.now();

/**
 * A policy and the session a transcription with words would open for it (transcribe/run.ts):
 * the policy's reads and the anchors' focus. The policies timed on one clip share its
 * prefill (timePolicy closes with close(true)).
 */
export function timedSession(
  config: ModelConfig,
  audioLength: number,
  policyName: PolicyName,
  budget: number,
  heads: HeadsFile | undefined,
  maxNewTokens: number,
  policyOptions?: Record<string, unknown>,
): { policy: KvPolicy; layout: PolicyLayout; options: SessionOptions } {
  const policy = createPolicy(policyName, { ...policyOptions, budget, heads });
  const layout = policyLayout(config, audioLength);
  const request = { ...policy.request(layout), alsoScore: sharedPrefillWindows(layout) };
  const timing = wordTimingHeads(policy, heads, budget);
  return {
    policy,
    layout,
    options: { audioLength, maxNewTokens, request, readouts: timing.length ? { focus: timing } : {} },
  };
}

export async function timePolicy(
  backend: DecoderBackend,
  config: ModelConfig,
  embeddings: Float32Array,
  audioLength: number,
  policyName: PolicyName,
  budget: number,
  heads: HeadsFile | undefined,
  steps: number,
  t: TimingOptions = {},
): Promise<PolicyTiming> {
  const { policy, options } = timedSession(config, audioLength, policyName, budget, heads, steps + 3, t.policyOptions);
  // After the request: a policy may decide its lag for the clip (WnW's planLag 'auto').
  const pipelined = t.pipeline !== false && planLagOf(policy) >= 2;
  const stage = backend.open(options);
  const t0 = now();
  const pre = await stage.prefill(embeddings);
  const session = await pre.place(policy.prefill(pre.observation));
  // The recall a policy makes from the prefill before the first step (transcribe/run.ts does the same).
  const initial = policy.afterPrefill ? await session.apply(policy.afterPrefill()) : undefined;
  const prefillMs = now() - t0;
  const times: number[] = [];
  let bytes = initial?.bytesToGpu ?? 0;
  let bytesMax = 0;
  let rGpu = 0;
  let token = pre.token;
  const counters: StepCounters[] = [];
  // Pipelined: the token stays on the device (a stop token is fed on: timing does not depend on it).
  if (pipelined) session.submit(token);
  for (let i = 0; i < steps; i++) {
    const ts = now();
    let r;
    if (pipelined) {
      session.submit(null);
      r = await session.read();
    } else r = await session.step(token);
    const moved = await session.apply(policy.afterStep(r.observation));
    times.push(now() - ts);
    bytes += moved.bytesToGpu;
    bytesMax = Math.max(bytesMax, moved.bytesToGpu);
    rGpu += session.residency().rGpu;
    counters.push(session.counters());
    // Timing does not depend on which token is fed; a stop token would only end a real run.
    if (!isStop(config, r.token)) token = r.token;
  }
  const gpuKvMiB = session.residency().gpuBytesInUse / 2 ** 20;
  // Skip the first steps: they include lazy allocations and JIT warm-up.
  const warm = Math.min(4, steps - 1);
  session.close(true);
  return {
    policy: policyName,
    budget,
    // A kept prefill did no work: its speed is not measured (NaN, null in JSON).
    prefillTokensPerSecond: pre.reused ? NaN : (audioLength / prefillMs) * 1000,
    msPerToken: median(times.slice(warm)),
    rGpu: rGpu / steps,
    mbPerStep: bytes / steps / 1e6,
    mbPerStepMax: bytesMax / 1e6,
    gpuKvMiB,
    ...stepCounterMeans(counters.slice(warm)),
    pipelined,
  };
}

/** Per-step means of the counters (dispatches and submits as counted: constant but where the pool grew). */
function stepCounterMeans(
  cs: StepCounters[],
): Omit<
  PolicyTiming,
  | 'policy'
  | 'budget'
  | 'prefillTokensPerSecond'
  | 'msPerToken'
  | 'rGpu'
  | 'mbPerStep'
  | 'mbPerStepMax'
  | 'gpuKvMiB'
  | 'pipelined'
> {
  const mean = (f: (c: StepCounters) => number | undefined) =>
    cs.length ? cs.reduce((a, c) => a + (f(c) ?? 0), 0) / cs.length : 0;
  return {
    dispatchesPerStep: mean((c) => c.dispatches),
    submitsPerStep: mean((c) => c.submits),
    dispatchesPerLayer: mean((c) => c.dispatchesPerLayer),
    cpuWaitsPerStep: mean((c) => c.cpuWaits),
    readbackBytesPerStep: mean((c) => c.readbackBytes),
    bytesToGpuPerStep: mean((c) => c.bytesToGpu),
    growthSubmits: cs.reduce((a, c) => a + (c.growthSubmits ?? 0), 0),
  };
}

/**
 * The full cache, then WnW at r_GPU 0.2, on one backend and the same embeddings; with
 * `withPaperLag`, also WnW with the paper's one-step lag (planLag 1), for which the loop waits
 * for every step (WnW's default lag is decided per clip: two steps where its budget holds the lead).
 */
export async function timeFullAndWnw(
  backend: DecoderBackend,
  config: ModelConfig,
  embeddings: Float32Array,
  audioLength: number,
  heads: HeadsFile | undefined,
  steps: number,
  t: TimingOptions & { withPaperLag?: boolean } = {},
): Promise<PolicyTiming[]> {
  const full = await timePolicy(backend, config, embeddings, audioLength, 'full', 1, heads, steps, t);
  const wnw = await timePolicy(backend, config, embeddings, audioLength, 'wnw', 0.2, heads, steps, t);
  if (!t.withPaperLag) return [full, wnw];
  const lag1 = await timePolicy(backend, config, embeddings, audioLength, 'wnw', 0.2, heads, steps, {
    ...t,
    policyOptions: { planLag: 1 },
  });
  return [full, wnw, { ...lag1, variant: 'planLag=1' }];
}

/** A heads file for random weights: seeded scores, roles and λ fitted exactly as calibration does. */
export function syntheticHeads(c: ModelConfig, clipLength: number): HeadsFile {
  const r = rng(11);
  const n = kvHeadCount(c);
  return buildHeadsFile({
    model: c.name,
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: Array.from({ length: n }, () => r()),
    headSensitivity: Array.from({ length: n }, () => r()),
    clipLengths: [clipLength],
    segmentLength: segmentLength(c),
  });
}
