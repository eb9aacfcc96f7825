/**
 * What a transcription asks the backend to export each decode step: the policy's heads,
 * then the heads word timing and evaluation read beside them, and whether their weights
 * come back or only what the device reduces them to. Word timing needs the anchors' focus
 * (session/timing.ts focusOf) and the tide chart their attention per segment; where the
 * anchors are the first rows of the export, in order, the device sums those rows as the CPU
 * would and returns the focus (32 bytes) and, with WnW's chunk choice, the segment sums
 * (4 bytes a segment), so T floats per anchor no longer cross to the CPU.
 */
import type { AttentionRequest } from '../kv/plan.js';

export interface DecodeReads {
  /** The request for the backend's session (the policy's, with the heads and reductions added). */
  request: AttentionRequest;
  /** Where each timing head's row is in the export. */
  timingIdx: number[];
  /** Where each of `allHeads`' rows is in the export. */
  attentionIdx: number[];
}

/**
 * `allHeads`: heads an onAttention hook reads (their weights come back); `tideChart`: an
 * onStep consumer reads the anchors' attention per segment.
 */
export function decodeReads(
  policy: AttentionRequest,
  timingHeads: readonly number[],
  allHeads: readonly number[],
  tideChart: boolean,
): DecodeReads {
  const extra = [...new Set([...timingHeads, ...allHeads])].filter((h) => !policy.decodeHeads.includes(h));
  const decodeHeads = [...policy.decodeHeads, ...extra];
  const timingIdx = timingHeads.map((h) => decodeHeads.indexOf(h));
  const timed = timingIdx.length > 0;
  // The device sums the export's first rows in order: the timing heads must be those rows.
  const focus = timed && timingIdx.every((i, j) => i === j);
  const dc = policy.decodeChunks;
  const sums = tideChart && focus && dc?.heads === timingIdx.length;
  // A policy's weights default to on, where it has heads of its own to read.
  const decodeWeights =
    (policy.decodeHeads.length > 0 && policy.decodeWeights !== false) ||
    allHeads.length > 0 ||
    (timed && !focus) ||
    (tideChart && timed && !sums);
  return {
    request: {
      ...policy,
      decodeHeads,
      decodeWeights,
      ...(focus ? { decodeFocus: { heads: timingIdx.length } } : {}),
      ...(sums && dc ? { decodeChunks: { ...dc, segmentSums: true } } : {}),
    },
    timingIdx,
    attentionIdx: allHeads.map((h) => decodeHeads.indexOf(h)),
  };
}
