/**
 * One benchmark measurement on one backend: prefill speed and decode step time of the
 * full cache and of a policy, on the same weights and the same audio embeddings, in the
 * same run (so only ratios are compared across machines).
 */
import type { DecoderBackend } from '../backend/types.js';
import { policyLayout } from '../backend/prompt.js';
import { isStop, kvHeadCount, segmentLength, type ModelConfig } from '../model/config.js';
import { rng } from '../model/testing.js';
import { buildHeadsFile } from '../calibrate/heads-file.js';
import { createPolicy, sharedPrefillWindows } from '../policy/registry.js';
import type { HeadsFile } from '../model/heads.js';
import type { PolicyName } from '../types.js';

export interface PolicyTiming {
  policy: PolicyName;
  budget: number;
  prefillTokensPerSecond: number;
  msPerToken: number;
  rGpu: number;
  mbPerStep: number;
  mbPerStepMax: number;
  gpuKvMiB: number;
  dispatchesPerStep: number;
  submitsPerStep: number;
}

const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

const now = () => performance.now();

export async function timePolicy(
  backend: DecoderBackend, config: ModelConfig, embeddings: Float32Array, audioLength: number,
  policyName: PolicyName, budget: number, heads: HeadsFile | undefined, steps: number,
): Promise<PolicyTiming> {
  const policy = createPolicy(policyName, { budget, heads });
  const layout = policyLayout(config, audioLength);
  // The policies timed on one clip share its prefill (end(true) below).
  const req = { ...policy.request(layout), alsoScore: sharedPrefillWindows(layout) };
  backend.begin({ audioLength, maxNewTokens: steps + 2, request: req });
  const t0 = now();
  const pre = await backend.prefill(embeddings);
  await backend.applyPrefill(policy.prefill(pre.observation));
  const prefillMs = now() - t0;
  const times: number[] = [];
  let bytes = 0;
  let bytesMax = 0;
  let rGpu = 0;
  let token = pre.token;
  let counters = backend.stepCounters();
  for (let i = 0; i < steps; i++) {
    const ts = now();
    const r = await backend.step(token);
    const moved = await backend.apply(policy.afterStep(r.observation));
    times.push(now() - ts);
    bytes += moved.bytesToGpu;
    bytesMax = Math.max(bytesMax, moved.bytesToGpu);
    rGpu += backend.residency().rGpu;
    counters = backend.stepCounters();
    // Timing does not depend on which token is fed; a stop token would only end a real run.
    if (!isStop(config, r.token)) token = r.token;
  }
  const gpuKvMiB = backend.residency().gpuBytesInUse / 2 ** 20;
  backend.end(true);
  return {
    policy: policyName,
    budget,
    // A kept prefill did no work: its speed is not measured (NaN, null in JSON).
    prefillTokensPerSecond: pre.reused ? NaN : (audioLength / prefillMs) * 1000,
    // Skip the first steps: they include lazy allocations and JIT warm-up.
    msPerToken: median(times.slice(Math.min(4, steps - 1))),
    rGpu: rGpu / steps,
    mbPerStep: bytes / steps / 1e6,
    mbPerStepMax: bytesMax / 1e6,
    gpuKvMiB,
    dispatchesPerStep: counters.dispatches,
    submitsPerStep: counters.submits,
  };
}

/** The full cache, then WnW at r_GPU 0.2, on one backend and the same embeddings. */
export async function timeFullAndWnw(
  backend: DecoderBackend, config: ModelConfig, embeddings: Float32Array, audioLength: number,
  heads: HeadsFile | undefined, steps: number,
): Promise<[PolicyTiming, PolicyTiming]> {
  const full = await timePolicy(backend, config, embeddings, audioLength, 'full', 1, heads, steps);
  const wnw = await timePolicy(backend, config, embeddings, audioLength, 'wnw', 0.2, heads, steps);
  return [full, wnw];
}

/** A heads file for random weights: seeded scores, roles and λ fitted exactly as calibration does. */
export function syntheticHeads(c: ModelConfig, clipLength: number): HeadsFile {
  const r = rng(11);
  const n = kvHeadCount(c);
  return buildHeadsFile({
    model: c.name, numLayers: c.numLayers, numKvHeads: c.numKvHeads,
    voiceScore: Array.from({ length: n }, () => r()), headSensitivity: Array.from({ length: n }, () => r()),
    clipLengths: [clipLength], segmentLength: segmentLength(c),
  });
}
