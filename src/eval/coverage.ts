/**
 * "Attention covered": per head and decode step, the share of the full cache's audio
 * attention mass that falls on positions the policy has on the GPU at that step. Where a
 * transcript shows only that a policy went wrong, this shows where: a head whose recall
 * missed what the full cache attends to, a layer whose selection is blind to it. A
 * summary slot stands in for positions but does not hold them, so it covers nothing.
 *
 * The full cache's weights are kept for a sample of steps (every `stride`-th), so that a
 * long clip's record stays within a bound: heads × audio positions floats per kept step.
 */
import type { Probe } from '../research.js';

/** The full cache's per-head audio attention at the sampled decode steps. */
export interface AttentionSample {
  stride: number;
  weights: Map<number, Float32Array[]>;
}

/** Floats of attention kept per clip at most (32 MB of f32). */
export const MAX_SAMPLED_FLOATS = 8_000_000;

/** The step stride that keeps steps × heads × audioLength floats within `maxFloats`. */
export function sampleStride(
  steps: number,
  heads: number,
  audioLength: number,
  maxFloats = MAX_SAMPLED_FLOATS,
): number {
  return Math.max(1, Math.ceil((steps * heads * audioLength) / maxFloats));
}

/** An onAttention hook for a decode of `steps` steps: it records every stride-th step, the stride set by the first step's shape. */
export function recordAttention(steps: number): {
  sample: AttentionSample;
  onAttention: NonNullable<Probe['onAttention']>;
} {
  const sample: AttentionSample = { stride: 0, weights: new Map() };
  return {
    sample,
    onAttention: (step, w) => {
      if (sample.stride === 0) sample.stride = sampleStride(steps, w.length, w[0]?.length ?? 0);
      if (step % sample.stride === 0)
        sample.weights.set(
          step,
          w.map((x) => Float32Array.from(x)),
        );
    },
  };
}

export interface Coverage {
  /** Per KV head: the mean over sampled steps of the covered share of its audio attention mass. */
  perHead: number[];
  /** Mean over heads. */
  mean: number;
  /** Steps measured. */
  steps: number;
}

/** An onResidency hook measuring the policy's residency against the full cache's sampled attention. */
export function measureCoverage(sample: AttentionSample): {
  onResidency: NonNullable<Probe['onResidency']>;
  result(): Coverage | null;
} {
  let sums: Float64Array | null = null;
  let counts: Int32Array | null = null;
  let steps = 0;
  return {
    onResidency(step, resident) {
      const full = sample.weights.get(step);
      if (!full) return;
      sums ??= new Float64Array(full.length);
      counts ??= new Int32Array(full.length);
      full.forEach((w, h) => {
        let all = 0;
        let covered = 0;
        for (let p = 0; p < w.length; p++) {
          all += w[p];
          if (w[p] !== 0 && resident(h, p)) covered += w[p];
        }
        if (all > 0) {
          sums![h] += covered / all;
          counts![h]++;
        }
      });
      steps++;
    },
    result() {
      if (!sums || !counts || steps === 0) return null;
      const perHead = Array.from(sums, (s, h) => (counts![h] ? s / counts![h] : 0));
      return { perHead, mean: perHead.reduce((a, b) => a + b, 0) / (perHead.length || 1), steps };
    },
  };
}
