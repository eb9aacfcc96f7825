/**
 * What a fixed head drops, kept as one summary slot per segment (kv/summary.ts): the mean
 * key and value of the segment's dropped positions, attended with a log(count) bias. The
 * method's fixed heads hand a dropped segment's softmax mass to the few positions they
 * keep; the summary gives it back, at one GPU slot per segment.
 */
import { keepInSegment } from '../select.js';

/**
 * Per group of `g` positions (g ≤ n, groups never straddle a segment of n positions): the
 * sorted positions of [0, T) that `kept` (sorted) leaves out, where there are any.
 */
export function segmentSummaries(kept: Int32Array, T: number, n: number, g = n): Int32Array[] {
  const out: Int32Array[] = [];
  let j = 0;
  for (const [start, end] of groups(T, n, g)) {
    const dropped: number[] = [];
    for (let p = start; p < end; p++) {
      while (j < kept.length && kept[j] < p) j++;
      if (j >= kept.length || kept[j] !== p) dropped.push(p);
    }
    if (dropped.length) out.push(Int32Array.from(dropped));
  }
  return out;
}

/** The [start, end) ranges of the summary groups: each segment cut into pieces of g from its start. */
function* groups(T: number, n: number, g: number): Generator<[number, number]> {
  for (let seg = 0; seg < T; seg += n) {
    const segEnd = Math.min(T, seg + n);
    for (let start = seg; start < segEnd; start += g) yield [start, Math.min(segEnd, start + g)];
  }
}

/**
 * Summary slots a head at `retention` takes on a clip of T positions, at most: one per
 * group of a segment that keeps fewer than all its positions (every group of it, since
 * which ones the kept positions fill is known only at prefill); with the global
 * selection, every group unless nothing is dropped.
 */
export function summarySlots(T: number, retention: number, n: number, selection: 'segment' | 'global', g = n): number {
  if (retention >= 1 || T === 0) return 0;
  if (selection === 'global' && keepInSegment(retention, T) >= T) return 0;
  let slots = 0;
  for (let seg = 0; seg < T; seg += n) {
    const len = Math.min(T, seg + n) - seg;
    if (selection === 'global' || keepInSegment(retention, len) < len) slots += Math.ceil(len / g);
  }
  return slots;
}
