/**
 * Summary slots: one pool slot standing for a group of c dropped positions of a head,
 * holding the mean of their keys and values. Attention gives it the score
 * q·k̄ / √d + ln c, i.e. the weight c · exp(q·k̄ / √d): by Jensen a lower bound on the
 * group's true mass Σ exp(q·k_i / √d), exact when the group's scores are equal. Without
 * it, a head that keeps a few positions of a segment hands the whole segment's softmax
 * mass to those few (and to the text), which is what pulls a compressed cache towards
 * the stop token.
 *
 * Fitted to queries (`summarise` with the queries that chose what to drop, the prompt's
 * instruction rows): the value becomes the mean of the rows' values weighted as those
 * queries weigh them (the group's own attention output, where the plain mean treats a
 * position the queries ignore like the one they read), and, with `mass`, the count grows
 * to c · e^δ, δ = mean over the queries of log Σ exp(s_i) − ln c − s̄ ≥ 0, the Jensen gap
 * the mean key leaves (s_i = q·k_i / √d, s̄ = q·k̄ / √d): the slot then carries the mass
 * those queries gave the group, which a mean key under-counts wherever the scores spread.
 * A mass scale α gives c · e^(α·δ): the gap is exact for the instruction's queries only,
 * and a decode query that reads the group less sharply is over-counted by the full δ, so
 * α between 0 ('value') and 1 ('mass') trades the stop-token pull against that excess.
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

/** How a summary slot is made: the plain mean, or fitted to queries (the value; the value and the mass). */
export type SummaryFit = 'mean' | 'value' | 'mass';

export interface Summary {
  key: Float32Array;
  value: Float32Array;
  /** The count its position entry carries: the group's size, or its effective size under the queries (`mass`). */
  count: number;
}

/** Counts past this would overflow the position entry (an Int32): a mass that large is every bit of the softmax anyway. */
const MAX_COUNT = 2 ** 30;

/**
 * The summary of `count` rows of keys `k` and values `v` ([count, hd]); `queries`
 * ([nq, hd], post-RoPE, the rows whose attention chose the group) fit it as `fit` says.
 * Without queries (or `fit` 'mean') it is the plain mean. `massScale` (α ≥ 0, 'mass'
 * only) scales δ in the count.
 */
export function summarise(
  k: Float32Array,
  v: Float32Array,
  count: number,
  hd: number,
  fit: SummaryFit = 'mean',
  queries?: Float32Array,
  massScale = 1,
): Summary {
  const key = meanRows(k, count, hd, new Float32Array(hd));
  const nq = queries ? Math.floor(queries.length / hd) : 0;
  if (fit === 'mean' || nq === 0 || count === 1)
    return { key, value: meanRows(v, count, hd, new Float32Array(hd)), count };
  const scale = 1 / Math.sqrt(hd);
  const weight = new Float64Array(count);
  const s = new Float64Array(count);
  let gap = 0;
  for (let r = 0; r < nq; r++) {
    const qo = r * hd;
    let max = -Infinity;
    for (let i = 0; i < count; i++) {
      let dot = 0;
      for (let d = 0; d < hd; d++) dot += queries![qo + d] * k[i * hd + d];
      s[i] = dot * scale;
      if (s[i] > max) max = s[i];
    }
    let dotMean = 0;
    for (let d = 0; d < hd; d++) dotMean += queries![qo + d] * key[d];
    let sum = 0;
    for (let i = 0; i < count; i++) sum += Math.exp(s[i] - max);
    for (let i = 0; i < count; i++) weight[i] += Math.exp(s[i] - max) / sum / nq;
    // ≥ 0 up to rounding: the mean of the scores is the score of the mean key.
    gap += Math.max(0, max + Math.log(sum) - Math.log(count) - dotMean * scale);
  }
  const acc = new Float64Array(hd);
  for (let i = 0; i < count; i++) for (let d = 0; d < hd; d++) acc[d] += weight[i] * v[i * hd + d];
  const value = Float32Array.from(acc);
  if (fit === 'value') return { key, value, count };
  return {
    key,
    value,
    count: Math.min(MAX_COUNT, Math.max(count, Math.round(count * Math.exp((massScale * gap) / nq)))),
  };
}
