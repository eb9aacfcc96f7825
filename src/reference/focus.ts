/**
 * Word timing's focus, in plain TypeScript: the attention-weighted centre of the anchors'
 * top positions. shaders/focus.wgsl computes the same on the device (e2e/kernels.spec.ts
 * checks them bit for bit); src/transcribe/timing.ts dates words with it.
 */

/**
 * Attention-weighted centre of the top `k` audio positions; -1 if there is no mass. The top
 * are the positions with mass (> 0) first in (weight descending, position ascending), in
 * that order: what shaders/focus.wgsl chooses on the device, whose readback is then
 * `focusCentre`'s input.
 */
export function focusOf(weights: Float32Array, k = 4): number {
  const top: number[] = [];
  for (let i = 0; i < weights.length; i++) {
    if (weights[i] <= 0) continue;
    if (top.length < k) {
      top.push(i);
      top.sort((a, b) => weights[b] - weights[a]);
    } else if (weights[i] > weights[top[k - 1]]) {
      top[k - 1] = i;
      top.sort((a, b) => weights[b] - weights[a]);
    }
  }
  return focusCentre(
    top,
    top.map((i) => weights[i]),
  );
}

/** The centre of `positions` weighted by `weights` (one each, summed in this order); -1 if they hold no mass. */
export function focusCentre(positions: ArrayLike<number>, weights: ArrayLike<number>): number {
  let m = 0;
  let s = 0;
  for (let j = 0; j < positions.length; j++) {
    m += weights[j] * positions[j];
    s += weights[j];
  }
  return s > 0 ? m / s : -1;
}

/** The focus of rows `idx` of `weights` summed (`anchorSum`), -1 where they hold no mass or there are none. */
export function focusOfRows(weights: ArrayLike<number>[], idx: readonly number[], n: number): number {
  const sum = anchorSum(weights, idx, n);
  return sum ? focusOf(sum) : -1;
}

/**
 * Rows `idx` of `weights` summed per position in f32, in that order: the anchors' attention
 * whose focus dates a token (the device sums its exported rows in the same order).
 */
export function anchorSum(weights: ArrayLike<number>[], idx: readonly number[], n: number): Float32Array | null {
  if (idx.length === 0) return null;
  const a = new Float32Array(n);
  for (const i of idx) {
    const w = weights[i];
    for (let p = 0; p < n; p++) a[p] += w[p];
  }
  return a;
}
