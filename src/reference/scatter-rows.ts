/**
 * What scatter_rows.wgsl does, in plain TS: a step's landing words (the index table, then the
 * rows and words it points at) written into a shard's K and V words, the positions and the
 * page tables. The layout is the one `StepWrites` (src/backend/webgpu/step-writes.ts) builds:
 * landing[0] = entries, entries of four words from word 4, each
 *   rows:  (dst slot within the shard, src word of the keys, rows, shard), values at src + rows · rowWords;
 *   words: (dst word, src word, words, SCATTER_WORDS | target), target 0 positions, 1 tables.
 * `rowWords` is a row's u32 words: headDim (f32) or headDim / 2 (f16 pairs).
 */
export const SCATTER_WORDS = 0x80000000;
export const SCATTER_POSITIONS = 0;
export const SCATTER_TABLES = 1;
/** Words of one index entry, and the header before the first. */
export const ENTRY_WORDS = 4;
export const INDEX_HEADER_WORDS = 4;

export interface ScatterTargets {
  /** Per shard, its K and V words. */
  k: Uint32Array[];
  v: Uint32Array[];
  positions: Uint32Array;
  tables: Uint32Array;
}

/**
 * The landing's entries written into `into`. `dispatch`: as one of the kernel's dispatches,
 * which writes only its shard's rows and, where `words`, the word entries; absent: all of them.
 */
export function scatterRows(
  landing: Uint32Array,
  rowWords: number,
  into: ScatterTargets,
  dispatch?: { shard: number; words: boolean },
): void {
  const count = landing[0];
  for (let e = 0; e < count; e++) {
    const b = INDEX_HEADER_WORDS + ENTRY_WORDS * e;
    const dst = landing[b];
    const src = landing[b + 1];
    const n = landing[b + 2];
    const tag = landing[b + 3];
    if (tag & SCATTER_WORDS) {
      if (dispatch && !dispatch.words) continue;
      const target = (tag & 1) === SCATTER_TABLES ? into.tables : into.positions;
      target.set(landing.subarray(src, src + n), dst);
      continue;
    }
    if (dispatch && tag !== dispatch.shard) continue;
    const words = n * rowWords;
    into.k[tag].set(landing.subarray(src, src + words), dst * rowWords);
    into.v[tag].set(landing.subarray(src + words, src + 2 * words), dst * rowWords);
  }
}
