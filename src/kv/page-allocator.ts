/**
 * The KV pool's page allocator, in the spirit of vLLM's block manager: a fixed number of
 * pages of `pageSize` slots, one page table per KV head (flat head = layer *
 * numKvHeads + kvHead), and a free list. It knows nothing of policies, positions (the
 * residency's) or storage: backends own the bytes (the GPU's are `GpuPool`) and mirror the
 * page tables to wherever attention reads them.
 *
 * Page size: the runtime uses WnW's segment length n_s = ceil(2 s * audio tokens/s)
 * (25 slots at 12.5 tokens/s). A recalled segment then fills exactly one page and its
 * release frees exactly that page, so the pool never fragments under WnW's
 * recall/release traffic; policies that keep scattered subsets pack them densely.
 *
 * Shards: a backend whose storage cannot hold every page in one buffer (WebGPU's
 * per-binding limit) splits the pages into shards, each serving a contiguous range of
 * heads, so a kernel that reads one layer's heads binds one shard's buffers. A head
 * only ever gets pages of its own shard; without shards there is one for all heads.
 */
import { ContextTooLongError } from '../errors.js';

/** `PageAllocator.changedFrom` of a head whose table has not changed. */
export const UNCHANGED = 0x7fffffff;

export interface PoolShape {
  heads: number;
  pageSize: number;
  numPages: number;
  /** Bytes one page occupies (keys + values + positions), for accounting and errors. */
  bytesPerPage: number;
  /** Disjoint page ranges, each serving a contiguous range of heads; default: one shard of every page for every head. */
  shards?: PoolShard[];
}

export interface PoolShard {
  /** Heads [firstHead, firstHead + heads) allocate from this shard only. */
  firstHead: number;
  heads: number;
  /** Pages [firstPage, firstPage + pages), within [0, numPages). */
  firstPage: number;
  pages: number;
}

export class PageAllocator {
  readonly heads: number;
  readonly pageSize: number;
  /** Page ids run over [0, numPages); with shards, pages between shards are never handed out. */
  numPages: number;
  /** Pages that can be handed out (the shards' pages together). */
  capacity: number;
  readonly bytesPerPage: number;
  readonly shards: PoolShard[];
  private readonly tables: number[][];
  private readonly free: number[][]; // per shard
  private readonly shardOf: Int32Array; // per head
  private owner: Int32Array;
  /**
   * Heads whose tables changed since the last `clearChanges` (`changedCount` of them, in
   * the order they first changed), and per head the first entry that changed (UNCHANGED
   * if none): a backend uploads those entries, not every head's table, each step.
   */
  readonly changedHeads: Int32Array;
  readonly changedFrom: Int32Array;
  changedCount = 0;

  /**
   * `shards: []` with `numPages: 0` makes a pool that grows by `addShard` (a per-layer
   * prefill adds each layer's pages once that layer's plan is known).
   */
  constructor(shape: PoolShape) {
    const growing = shape.shards?.length === 0 && shape.numPages === 0;
    if (shape.pageSize < 1 || (shape.numPages < 1 && !growing) || shape.heads < 1) {
      throw new RangeError(`invalid pool shape ${JSON.stringify(shape)}`);
    }
    this.heads = shape.heads;
    this.pageSize = shape.pageSize;
    this.numPages = shape.numPages;
    this.bytesPerPage = shape.bytesPerPage;
    this.shards = [...(shape.shards ?? [{ firstHead: 0, heads: shape.heads, firstPage: 0, pages: shape.numPages }])];
    this.shardOf = growing
      ? new Int32Array(shape.heads).fill(-1)
      : checkShards(this.shards, shape.heads, shape.numPages);
    this.capacity = this.shards.reduce((n, s) => n + s.pages, 0);
    this.tables = Array.from({ length: shape.heads }, () => []);
    // Pop from the end: pages come out in ascending order, which keeps tests readable.
    this.free = this.shards.map((s) => Array.from({ length: s.pages }, (_, i) => s.firstPage + s.pages - 1 - i));
    this.owner = new Int32Array(shape.numPages).fill(-1);
    this.changedHeads = new Int32Array(shape.heads);
    this.changedFrom = new Int32Array(shape.heads).fill(UNCHANGED);
  }

  /** Forgets the changes recorded so far (a backend has uploaded them). */
  clearChanges(): void {
    for (let i = 0; i < this.changedCount; i++) this.changedFrom[this.changedHeads[i]] = UNCHANGED;
    this.changedCount = 0;
  }

  private changed(head: number, from: number): void {
    const was = this.changedFrom[head];
    if (was === UNCHANGED) {
      this.changedHeads[this.changedCount++] = head;
      this.changedFrom[head] = from;
    } else if (from < was) this.changedFrom[head] = from;
  }

  /**
   * Appends a shard of `pages` new page ids (after every existing one) for heads that
   * have none yet; returns it.
   */
  addShard(firstHead: number, heads: number, pages: number): PoolShard {
    const s: PoolShard = { firstHead, heads, firstPage: this.numPages, pages };
    if (heads < 1 || firstHead < 0 || firstHead + heads > this.heads || pages < 0)
      throw new RangeError(`pool shard ${JSON.stringify(s)}: heads outside 0..${this.heads - 1} or negative pages`);
    for (let h = firstHead; h < firstHead + heads; h++)
      if (this.shardOf[h] !== -1) throw new RangeError(`pool shard ${JSON.stringify(s)}: head ${h} has pages already`);
    this.shardOf.fill(this.shards.length, firstHead, firstHead + heads);
    this.shards.push(s);
    this.free.push(Array.from({ length: pages }, (_, i) => s.firstPage + pages - 1 - i));
    const owner = new Int32Array(this.numPages + pages).fill(-1);
    owner.set(this.owner);
    this.owner = owner;
    this.numPages += pages;
    this.capacity += pages;
    return s;
  }

  /**
   * Adds `add[s]` pages to every shard s, keeping each shard's pages contiguous: a
   * shard's page ids move up by the pages added to the shards before it (returned, per
   * shard), its new pages follow its old ones. A backend whose storage is one buffer per
   * shard copies each shard whole into a larger buffer, at the same offsets within it.
   */
  grow(add: ArrayLike<number>): Int32Array {
    const shifts = new Int32Array(this.shards.length);
    const order = this.shards.map((_, i) => i).sort((a, b) => this.shards[a].firstPage - this.shards[b].firstPage);
    let moved = 0;
    for (const i of order) {
      shifts[i] = moved;
      moved += add[i];
    }
    const owner = new Int32Array(this.numPages + moved).fill(-1);
    this.shards.forEach((s, i) => {
      const d = shifts[i];
      owner.set(this.owner.subarray(s.firstPage, s.firstPage + s.pages), s.firstPage + d);
      const free = this.free[i].map((p) => p + d);
      // Popped from the end: the new pages come out first, in ascending order.
      for (let k = add[i] - 1; k >= 0; k--) free.push(s.firstPage + d + s.pages + k);
      this.free[i] = free;
      this.shards[i] = { ...s, firstPage: s.firstPage + d, pages: s.pages + add[i] };
    });
    for (let h = 0; h < this.heads; h++) {
      const d = shifts[this.shardOf[h]];
      if (!d) continue;
      this.tables[h] = this.tables[h].map((p) => p + d);
      this.changed(h, 0);
    }
    this.owner = owner;
    this.numPages += moved;
    this.capacity += moved;
    return shifts;
  }

  /** The shard whose pages `head` takes (-1 before a per-layer prefill has added it). */
  shardIndexOf(head: number): number {
    return this.shardOf[head];
  }

  /** Free pages of shard `shard`. */
  freeIn(shard: number): number {
    return this.free[shard].length;
  }

  get freePages(): number {
    return this.free.reduce((n, f) => n + f.length, 0);
  }

  get usedPages(): number {
    return this.capacity - this.freePages;
  }

  allocPage(head: number): number {
    const shard = this.shardOf[head];
    if (shard === -1) throw new Error(`head ${head} has no pool shard yet`);
    const page = this.free[shard].pop();
    if (page === undefined) {
      const s = this.shards[shard];
      const where =
        this.shards.length > 1 ? ` in shard ${shard} (heads ${s.firstHead}..${s.firstHead + s.heads - 1})` : '';
      throw new ContextTooLongError(
        (s.pages + 1) * this.bytesPerPage,
        s.pages * this.bytesPerPage,
        `KV pool is full${where} (${s.pages} pages of ${this.pageSize} slots)`,
      );
    }
    this.owner[page] = head;
    this.changed(head, this.tables[head].length);
    this.tables[head].push(page);
    return page;
  }

  freePage(head: number, page: number): void {
    if (this.owner[page] !== head) throw new Error(`page ${page} is not owned by head ${head}`);
    const t = this.tables[head];
    const at = t.indexOf(page);
    this.changed(head, at);
    t.splice(at, 1);
    this.owner[page] = -1;
    this.free[this.shardOf[head]].push(page);
  }

  /** The most pages any head holds (the decode attention's split-K grid follows it). */
  longestTable(): number {
    let m = 0;
    for (let h = 0; h < this.heads; h++) m = Math.max(m, this.tables[h].length);
    return m;
  }

  /** Page ids of a head, in table order. */
  pageTable(head: number): readonly number[] {
    return this.tables[head];
  }

  ownerOf(page: number): number {
    return this.owner[page];
  }

  /** Frees every page of every head. */
  reset(): void {
    for (let h = 0; h < this.heads; h++) for (const p of [...this.tables[h]]) this.freePage(h, p);
  }
}

/** Shard index per head; throws unless the shards cover every head once and their pages do not overlap. */
function checkShards(shards: readonly PoolShard[], heads: number, numPages: number): Int32Array {
  const of = new Int32Array(heads).fill(-1);
  const pages = new Uint8Array(numPages);
  shards.forEach((s, i) => {
    const bad = (why: string) => new RangeError(`pool shard ${i} ${JSON.stringify(s)}: ${why}`);
    if (s.heads < 1 || s.firstHead < 0 || s.firstHead + s.heads > heads) throw bad(`heads outside 0..${heads - 1}`);
    if (s.pages < 0 || s.firstPage < 0 || s.firstPage + s.pages > numPages)
      throw bad(`pages outside 0..${numPages - 1}`);
    for (let h = s.firstHead; h < s.firstHead + s.heads; h++) {
      if (of[h] !== -1) throw bad(`head ${h} is in shard ${of[h]} too`);
      of[h] = i;
    }
    for (let p = s.firstPage; p < s.firstPage + s.pages; p++) {
      if (pages[p]) throw bad(`page ${p} is in another shard too`);
      pages[p] = 1;
    }
  });
  const missing = of.indexOf(-1);
  if (missing !== -1) throw new RangeError(`pool shards leave head ${missing} without pages`);
  return of;
}
