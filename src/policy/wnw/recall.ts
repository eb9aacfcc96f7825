/**
 * How much WnW recalls per decode step, for a clip of a given length.
 *
 * The paper recalls the top 3 chunks of 4 s (two 2 s segments, stride one segment),
 * whatever the recording's length. Over a long recording that is a shrinking share of
 * the audio: three chunks cover 21 % of a minute's segments but 5 % of four minutes',
 * and on the calibration recordings the tidal heads' loss at r_GPU 0.1 grows with
 * length (docs/wnw-fidelity.md section 8). Under strictBudget the default is therefore
 * one-segment chunks, and a top-k that grows with the clip: one chunk per `recallEvery`
 * chunks of audio, never fewer than the paper's 3. The recall reserve follows
 * (topChunks · chunkSegments segments, unless `reserveSegments` says otherwise).
 * Paper mode (strictBudget false) keeps the paper's fixed chunks.
 */
import { WnwError } from '../../errors.js';
import type { PolicyOptions } from '../types.js';
import { numOpt } from '../select.js';
import { PAPER_CHUNKS, type ChunkOptions } from './chunks.js';

export interface RecallOptions {
  chunkSegments: number;
  /** A fixed top-k, or 'scaled': max(paper's 3, round(chunks / recallEvery)). */
  topChunks: number | 'scaled';
  recallEvery: number;
  delta: number;
  /** Segments after the best chosen chunk recalled with it (ChunkOptions.lead). */
  lead: number;
}

/** Chosen on the calibration recordings (docs/wnw-fidelity.md section 8). */
export const SCALED_RECALL: RecallOptions = {
  chunkSegments: 1,
  topChunks: 'scaled',
  recallEvery: 9,
  delta: PAPER_CHUNKS.delta,
  lead: 0,
};

/** The recall options a policy was given, with the defaults of its mode. */
export function recallOptions(opts: PolicyOptions, strict: boolean): RecallOptions {
  const base: RecallOptions = strict
    ? SCALED_RECALL
    : { ...PAPER_CHUNKS, recallEvery: SCALED_RECALL.recallEvery, lead: 0 };
  const top = opts['topChunks'];
  const topChunks = top === 'scaled' ? 'scaled' : top === undefined ? base.topChunks : numOpt(opts, 'topChunks', 0, 1);
  if (opts['recallEvery'] !== undefined && topChunks !== 'scaled') {
    throw new WnwError(
      'BAD_ARGUMENT',
      'option "recallEvery" scales topChunks with the clip: it needs topChunks=scaled (the default under strictBudget), not a fixed topChunks',
    );
  }
  return {
    chunkSegments: numOpt(opts, 'chunkSegments', base.chunkSegments, 1),
    topChunks,
    recallEvery: numOpt(opts, 'recallEvery', base.recallEvery, 1),
    delta: numOpt(opts, 'delta', base.delta, 1),
    lead: numOpt(opts, 'lead', base.lead, 0),
  };
}

/** The chunk scheduler's options for a clip of T audio positions in segments of n. */
export function chunkOptionsFor(r: RecallOptions, T: number, n: number): ChunkOptions {
  const segments = Math.ceil(T / n);
  const chunks = Math.max(1, segments - r.chunkSegments + 1);
  const topChunks =
    r.topChunks === 'scaled' ? Math.max(PAPER_CHUNKS.topChunks, Math.round(chunks / r.recallEvery)) : r.topChunks;
  return { chunkSegments: r.chunkSegments, topChunks, delta: r.delta, lead: r.lead };
}

/**
 * Positions the recall reserve holds for a clip of `len` positions: per tidal head, the
 * CPU complement of `R` full segments at its retention (all but the kept where the clip has
 * fewer full segments), or of R · n positions under global selection.
 */
export function recallReserve(
  tidal: readonly number[],
  retention: readonly number[],
  R: number,
  len: number,
  n: number,
  selection: 'segment' | 'global',
): number {
  const fullSegs = Math.floor(len / n);
  let extra = 0;
  for (const h of tidal) {
    if (selection === 'segment') {
      extra += Math.min(R, fullSegs) * (n - Math.floor(retention[h] * n + 1e-9));
      if (R > fullSegs && len % n) extra += (len % n) - Math.floor(retention[h] * (len % n) + 1e-9);
    } else {
      extra += Math.min(R * n, len - Math.floor(retention[h] * len + 1e-9));
    }
  }
  return extra;
}
