/** Synthetic layouts, attention and heads files for the policy and calibration tests. */
import type { HeadsFile } from '../../src/model/heads.js';
import type { PolicyLayout, PrefillObservation, StepObservation, AttentionRequest } from '../../src/kv/plan.js';
import type { ResidencyTracker } from '../../src/policy/accounting.js';
import { buildHeadsFile } from '../../src/calibrate/heads-file.js';
import { EVALUATION_OPTIONS } from '../../src/policy/types.js';

/** Deterministic PRNG (mulberry32) so failures reproduce. */
import { rng } from '../../src/model/testing.js';
import { selectChunks } from '../../src/reference/chunk-select.js';
export { rng };

/** Ablation or diagnosis options as an evaluation passes them (a plain key is the method's, or refused). */
export function ablate(opts: Record<string, unknown>): { [EVALUATION_OPTIONS]: Record<string, unknown> } {
  return { [EVALUATION_OPTIONS]: opts };
}

export function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}

export function makeLayout(
  numLayers: number,
  numKvHeads: number,
  audioLength: number,
  extra: Partial<PolicyLayout> = {},
): PolicyLayout {
  const tokensPerSecond = extra.tokensPerSecond ?? 12.5;
  return {
    numLayers,
    numKvHeads,
    groupSize: 2,
    headDim: 16,
    audioLength,
    tokensPerSecond,
    segmentLength: Math.ceil(2 * tokensPerSecond),
    instructionLength: 12,
    ...extra,
  };
}

/** Prefill scores with a front-loaded bias (as the paper measured) plus per-head peaks. */
export function prefillObservation(layout: PolicyLayout, seed: number, withKeys = false): PrefillObservation {
  const r = rng(seed);
  const N = layout.numLayers * layout.numKvHeads;
  const T = layout.audioLength;
  const scores = Array.from({ length: N }, () => {
    const s = new Float32Array(T);
    const peaks = Array.from({ length: 5 }, () => Math.floor(r() * T));
    for (let p = 0; p < T; p++) {
      s[p] = 0.2 * r() + 2 * Math.exp(-p / (0.1 * T));
      for (const c of peaks) s[p] += Math.exp(-Math.abs(p - c) / 3);
    }
    return s;
  });
  const keys = withKeys
    ? Array.from({ length: N }, () => Float32Array.from({ length: T * layout.headDim }, () => gauss(r)))
    : undefined;
  return { layout, scores, keys };
}

/**
 * One decode step's exports: the requested heads' weights follow a focus that walks
 * forward through the audio (with occasional jumps), zero where a position is not on
 * the GPU, as the runtime exports them.
 */
export function stepObservation(
  layout: PolicyLayout,
  req: AttentionRequest,
  tracker: ResidencyTracker,
  step: number,
  focus: number,
  r: () => number,
): StepObservation {
  const T = layout.audioLength;
  const d = layout.headDim;
  // As a backend does: the weights are computed for the chunk choice even when not handed over.
  const weights = (req.decodeWeights === false && !req.decodeChunks ? [] : req.decodeHeads).map((h) => {
    const w = new Float32Array(T);
    let sum = 0;
    for (let p = 0; p < T; p++) {
      if (!tracker.onGpu(h, p)) continue;
      w[p] = Math.exp(-Math.abs(p - focus) / 4) + 0.01 * r();
      sum += w[p];
    }
    // g query heads, each a softmax that also spends mass on text: sums to ~g·0.8 on audio.
    if (sum > 0) for (let p = 0; p < T; p++) w[p] *= (layout.groupSize * 0.8) / sum;
    return w;
  });
  const queries = req.decodeQueries
    ? req.decodeHeads.map(() => Float32Array.from({ length: layout.groupSize * d }, () => gauss(r)))
    : undefined;
  const dc = req.decodeChunks;
  const chunks = dc
    ? selectChunks(weights, { ...dc, audioLength: T, segmentLength: layout.segmentLength }).chunks
    : undefined;
  return { step, weights: req.decodeWeights === false ? [] : weights, queries, ...(chunks ? { chunks } : {}) };
}

/** A heads file from random VS / HS over a layout, calibrated on a few clip lengths. */
export function syntheticHeads(layout: PolicyLayout, seed: number, budgets = [0.1, 0.2, 0.4, 0.6, 0.8]): HeadsFile {
  const r = rng(seed);
  const N = layout.numLayers * layout.numKvHeads;
  return buildHeadsFile({
    model: 'synthetic',
    numLayers: layout.numLayers,
    numKvHeads: layout.numKvHeads,
    voiceScore: Array.from({ length: N }, () => r()),
    headSensitivity: Array.from({ length: N }, () => 0.1 + r()),
    budgets,
    clipLengths: [300, 750, 1200],
    segmentLength: layout.segmentLength,
  });
}
