/**
 * Fidelity to the full cache, step by step: how often a policy's cache picks the full
 * cache's greedy token, and how far its next-token distribution is from the full
 * cache's, KL(full ‖ policy). Both read the logits of the same forced token sequence,
 * so a step's numbers compare the two caches on the same context. With the token the
 * full cache stopped on, also how much the policy's cache moves that token's
 * log-probability (a cache that pushes the model to stop early shows it at every step,
 * long before the one step where free decoding ends). Pure and in f64: a cache that keeps
 * everything must come out at exactly 1, 0 and 0.
 */
// The greedy choice as the backends make it (first index of the largest logit).
import { argmax } from '../reference/argmax.js';

/** log-softmax in f64 (max-shifted, so large logits do not overflow). */
export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  const out = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) out[i] = logits[i] - lse;
  return out;
}

/** KL(p ‖ q) from log-probabilities, in nats; terms where p is 0 contribute nothing. */
export function klDivergence(logP: Float64Array, logQ: Float64Array): number {
  let kl = 0;
  for (let i = 0; i < logP.length; i++) {
    const p = Math.exp(logP[i]);
    if (p > 0) kl += p * (logP[i] - logQ[i]);
  }
  // Rounding can leave a tiny negative where the two are equal; KL is never below 0.
  return Math.max(0, kl);
}

export interface StepFidelity {
  /** Steps compared. */
  steps: number;
  /** Steps where the policy's argmax is the full cache's. */
  agreeing: number;
  /** Sum over steps of KL(full ‖ policy), nats. */
  klSum: number;
  /** Sum over steps of log p_policy(stop) − log p_full(stop); null without a stop token. */
  stopShiftSum: number | null;
}

/**
 * Compares the two caches' logits step by step; both lists come from decoding the same
 * tokens. `stopToken`: the token the full cache's free run stopped on, if it did.
 */
export function compareSteps(
  full: readonly Float32Array[],
  policy: readonly Float32Array[],
  stopToken: number | null = null,
): StepFidelity {
  if (full.length !== policy.length)
    throw new RangeError(`the full cache has logits for ${full.length} steps, the policy for ${policy.length}`);
  let agreeing = 0;
  let klSum = 0;
  let stopShiftSum = 0;
  for (let t = 0; t < full.length; t++) {
    if (full[t].length !== policy[t].length)
      throw new RangeError(`step ${t}: ${full[t].length} logits against ${policy[t].length}`);
    if (argmax(full[t]) === argmax(policy[t])) agreeing++;
    const p = logSoftmax(full[t]);
    const q = logSoftmax(policy[t]);
    klSum += klDivergence(p, q);
    if (stopToken !== null) stopShiftSum += q[stopToken] - p[stopToken];
  }
  return { steps: full.length, agreeing, klSum, stopShiftSum: stopToken !== null ? stopShiftSum : null };
}

/** Top-1 agreement, mean KL and mean stop-token shift per step; null over no steps (nothing to compare). */
export function fidelityMeans(f: StepFidelity): {
  agreement: number | null;
  klVsFull: number | null;
  stopShift: number | null;
} {
  if (f.steps === 0) return { agreement: null, klVsFull: null, stopShift: null };
  return {
    agreement: f.agreeing / f.steps,
    klVsFull: f.klSum / f.steps,
    stopShift: f.stopShiftSum === null ? null : f.stopShiftSum / f.steps,
  };
}
