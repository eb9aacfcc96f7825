/**
 * Summary slots: one pool slot standing for a group of c dropped positions of a head,
 * holding the mean of their keys and values. Attention gives it the score
 * q·k̄ / √d + ln c, i.e. the weight c · exp(q·k̄ / √d): by Jensen a lower bound on the
 * group's true mass Σ exp(q·k_i / √d), exact when the group's scores are equal. Without
 * it, a head that keeps a few positions of a segment hands the whole segment's softmax
 * mass to those few (and to the text), which is what pulls a compressed cache towards
 * the stop token.
 *
 * The slot's position entry carries the count, so the kernels need no extra binding:
 * entry −(c + 1) for a summary of c positions. EMPTY (−1) is then the summary of nothing,
 * whose weight exp(−∞) is 0, and every kernel reads both with one rule (`slotBias`).
 */

/** The position entry of a summary slot over `count` ≥ 1 positions. */
export function summaryEntry(count: number): number {
  if (!(Number.isInteger(count) && count >= 1)) throw new Error(`a summary slot needs a whole count ≥ 1, got ${count}`);
  return -(count + 1);
}

/** The additive score bias of a slot whose position entry is negative: ln(count), −∞ for EMPTY. */
export function slotBias(entry: number): number {
  return Math.log(-entry - 1);
}

/** Averages `count` rows of `width` from `rows` (row i at i · width) into `out`. */
export function meanRows(rows: Float32Array, count: number, width: number, out: Float32Array): Float32Array {
  const acc = new Float64Array(width);
  for (let i = 0; i < count; i++) for (let d = 0; d < width; d++) acc[d] += rows[i * width + d];
  for (let d = 0; d < width; d++) out[d] = acc[d] / count;
  return out;
}
