/**
 * How many pool pages a session needs: computed from the prefill plan before any
 * page is touched, so an over-budget plan fails with a typed error up front.
 */
import type { PrefillPlan } from './plan.js';
import { ContextTooLongError } from '../errors.js';

export interface PoolNeed {
  /** Dense audio pages kept at prefill, all heads. */
  audioPages: number;
  /** Text pages (prefix, instruction, generated tokens), all heads. */
  textPages: number;
  /** Room for recalled segments: each recall batch takes fresh pages. */
  recallPages: number;
  total: number;
  /** Every page above, per head (a backend with a sharded pool sums them per shard). */
  perHead: Int32Array;
}

/** Recall headroom per head with recallable positions, in pages (a recall window of a few chunks). */
export const RECALL_PAGES_PER_HEAD = 48;

/**
 * Pages per head a pool shard adds when it runs out (kv/residency.ts): text KV is taken
 * as tokens are generated, and a growth every 8 pages keeps the copies rare (Voxtral, 30
 * minutes at 4 tokens a second: 36 growths in 7,200 steps) at under 8 pages of slack per head.
 */
export const GROWTH_PAGES_PER_HEAD = 8;

/**
 * Pages per head that `generated` tokens add to a pool whose text pages hold
 * `promptText` tokens, rounded up to whole growths: the most a pool grows for its text
 * (less where pages that releases free or recall headroom take the tokens first).
 */
export function grownTextPages(
  promptText: number,
  generated: number,
  pageSize: number,
  growPages = GROWTH_PAGES_PER_HEAD,
): number {
  const more = Math.ceil((promptText + generated) / pageSize) - Math.ceil(promptText / pageSize);
  return more <= 0 ? 0 : Math.ceil(more / growPages) * growPages;
}

export function poolNeed(plan: PrefillPlan, pageSize: number, textTokens: number): PoolNeed {
  let audioPages = 0;
  let recallPages = 0;
  const text = Math.ceil(textTokens / pageSize);
  const perHead = new Int32Array(plan.heads.length);
  plan.heads.forEach(({ gpu, cpu, summaries }, h) => {
    const audio = Math.ceil((gpu.length + (summaries?.length ?? 0)) / pageSize);
    const recall =
      cpu.length > 0
        ? Math.min(Math.ceil(countNotIn(cpu, gpu) / pageSize) + Math.ceil(cpu.length / pageSize), RECALL_PAGES_PER_HEAD)
        : 0;
    audioPages += audio;
    recallPages += recall;
    perHead[h] = audio + recall + text;
  });
  const textPages = plan.heads.length * text;
  return { audioPages, textPages, recallPages, total: audioPages + textPages + recallPages, perHead };
}

function countNotIn(a: Int32Array, sortedB: Int32Array): number {
  let n = 0;
  let j = 0;
  for (let i = 0; i < a.length; i++) {
    while (j < sortedB.length && sortedB[j] < a[i]) j++;
    if (j >= sortedB.length || sortedB[j] !== a[i]) n++;
  }
  return n;
}

/** Throws ContextTooLongError when `bytes` of pool pass the byte cap (none: no limit); `what` says what asked for them. */
export function checkPoolLimit(bytes: number, maxBytes: number | undefined, what: string): void {
  if (maxBytes !== undefined && bytes > maxBytes) throw new ContextTooLongError(bytes, maxBytes, what);
}

/** How a pool grows for text on demand: `growPages` per head at once, and the byte cap in whole pages. */
export function growthOptions(
  growPages: number,
  maxBytes: number | undefined,
  bytesPerPage: number,
): { growPages: number; maxPages?: number } {
  return { growPages, ...(maxBytes !== undefined ? { maxPages: Math.floor(maxBytes / bytesPerPage) } : {}) };
}
