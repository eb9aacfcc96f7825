/**
 * What passes between the residency and a backend's bytes: the page storage a backend
 * provides, the prefill rows it reads from, the gathers it performs and how it makes
 * summary slots. The residency decides placement; these are the backend's side of it.
 */
import type { PoolShard } from './page-allocator.js';
import type { SummaryFit } from './summary.js';
import type { StoredRun } from './offload.js';

/** Where a backend keeps page contents. Slot index = page * pageSize + slot-in-page. */
export interface PageStorage {
  /** Writes `count` keys and values ([count, headDim] each) into consecutive slots from `slot`. */
  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void;
  /**
   * The same rows as the offload store keeps them, in the pool's own element format (f32,
   * or an f16 pool's bits): moved as they are, with no conversion (a recall's rows are
   * most of a step's host time where each element is converted).
   */
  writeStoredRows?(slot: number, count: number, run: StoredRun): void;
  /** Makes the given slots' positions (from `positions`, the residency mirror) visible to attention. */
  syncPositions(firstSlot: number, count: number, positions: Int32Array): void;
  /**
   * The pool grew (PageAllocator.grow): shard i's pages `from[i]` are now `to[i]`, the old ones
   * at the start of the new range. Storage without it makes a fixed pool. True when the
   * storage moved the slots' positions with the pages itself (else every slot is synced).
   */
  grow?(from: readonly PoolShard[], to: readonly PoolShard[]): boolean | void;
}

/** Reads one K/V row of the full prefill cache: head, sequence position. */
export type KvSource = (
  head: number,
  seqPos: number,
  k: Float32Array,
  kOff: number,
  v: Float32Array,
  vOff: number,
) => void;

/**
 * How summary slots are made (kv/summary.ts `summarise`): the fit, and per head the
 * queries that chose what it dropped ([count, headDim], post-RoPE), where the fit needs them.
 */
export interface SummaryPlacement {
  fit: SummaryFit;
  /** Per head, the scale α of δ in a 'mass' slot's count (kv/summary.ts); 1 when absent. */
  massScale?: (head: number) => number;
  queries: (head: number) => Float32Array | undefined;
}

/** A gather the backend performs: copy prefill row `seqPositions[i]` of `head` into pool slot `slots[i]`. */
export interface Gather {
  head: number;
  slots: Int32Array;
  seqPositions: Int32Array;
}
