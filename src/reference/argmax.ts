/** Index of the largest logit; ties go to the lowest index (the GPU kernel does the same): greedy decoding, shared by
 * the CPU backend and the eval. */
export function argmax(logits: Float32Array, length = logits.length): number {
  let best = 0;
  for (let i = 1; i < length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}
