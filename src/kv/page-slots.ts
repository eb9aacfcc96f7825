/**
 * The pool's slots as the residency hands them out: per page what it holds (audio or
 * text) and how many of its slots are live, per head the empty slots inside its audio
 * pages and where its next text slot is, and per slot the sequence position it holds
 * (`positions`, the attention kernels' view). Audio pages are filled densely from their
 * start; a freed slot becomes a hole its head's next recall may take, and a page whose
 * last slot is freed goes back to the pool. It knows nothing of plans or CPU copies.
 */
import { PageAllocator, type PoolShard } from './page-allocator.js';
import { movePages } from './growth.js';

export const EMPTY = -1;
/** A hole allocAudio has handed out, until its caller writes the slot's position. */
const TAKEN = -2;

const FREE = 0;
const AUDIO = 1;
const TEXT = 2;

export class PageSlots {
  /** Sequence position held by every pool slot (EMPTY when unused). Replaced when the pool grows. */
  positions: Int32Array;
  /** Pages taken by text (released only by a rewind: truncateText). */
  textPages = 0;
  private live: Int32Array; // live slots per page
  /** Per page: FREE, AUDIO or TEXT. Text pages never take recalled rows. */
  private kind: Uint8Array;
  /** Per head, empty slots inside its audio pages (validated lazily when popped). */
  private readonly holes: number[][];
  private readonly textTail: Int32Array; // per head: next free text slot, or EMPTY
  /**
   * Per head, its text slots in the order they were taken (ascending sequence positions):
   * the first `textCount[h]` of `textSlots[h]`, which doubles when full, so a step's
   * append grows no array.
   */
  private readonly textSlots: Int32Array[];
  private readonly textCount: Int32Array;

  constructor(
    readonly pages: PageAllocator,
    heads: number,
  ) {
    this.positions = new Int32Array(pages.numPages * pages.pageSize).fill(EMPTY);
    this.live = new Int32Array(pages.numPages);
    this.kind = new Uint8Array(pages.numPages);
    this.holes = Array.from({ length: heads }, () => []);
    this.textTail = new Int32Array(heads).fill(EMPTY);
    this.textSlots = Array.from({ length: heads }, () => new Int32Array(64));
    this.textCount = new Int32Array(heads);
  }

  private get pageSize(): number {
    return this.pages.pageSize;
  }

  /** Whether the head's next text slot needs a fresh page. */
  needsTextPage(head: number): boolean {
    return this.textTail[head] === EMPTY;
  }

  allocText(head: number): number {
    let slot = this.textTail[head];
    if (slot === EMPTY) {
      const page = this.pages.allocPage(head);
      this.textPages++;
      this.kind[page] = TEXT;
      slot = page * this.pageSize;
    }
    this.live[Math.floor(slot / this.pageSize)]++;
    this.textTail[head] = (slot + 1) % this.pageSize === 0 ? EMPTY : slot + 1;
    const n = this.textCount[head]++;
    let taken = this.textSlots[head];
    if (n === taken.length) {
      const more = new Int32Array(2 * n);
      more.set(taken);
      this.textSlots[head] = taken = more;
    }
    taken[n] = slot;
    return slot;
  }

  /**
   * Empties the head's text slots holding sequence positions from `fromSeqPos` on (a rewind
   * of the text: a next request forks there); pages left without a live slot go back to
   * the pool. Returns the slots emptied. Text is taken in sequence order, so they are the
   * head's last ones and its next text slot follows the last kept.
   */
  truncateText(head: number, fromSeqPos: number): number[] {
    const taken = this.textSlots[head];
    const freed: number[] = [];
    while (this.textCount[head] && this.positions[taken[this.textCount[head] - 1]] >= fromSeqPos) {
      const slot = taken[--this.textCount[head]];
      freed.push(slot);
      this.positions[slot] = EMPTY;
      const page = Math.floor(slot / this.pageSize);
      if (--this.live[page] === 0) {
        this.pages.freePage(head, page);
        this.kind[page] = FREE;
        this.textPages--;
      }
    }
    if (freed.length) {
      const last = this.textCount[head] ? taken[this.textCount[head] - 1] : -1;
      this.textTail[head] = last === -1 || (last + 1) % this.pageSize === 0 ? EMPTY : last + 1;
    }
    return freed;
  }

  /** `count` slots in fresh audio pages of `head`, filled from each page's start; the tail of the last page becomes holes. */
  allocDense(head: number, count: number): Int32Array {
    const out = new Int32Array(count);
    this.fillDense(head, count, out, 0);
    return out;
  }

  /** allocDense into `out` from index `at`. */
  private fillDense(head: number, count: number, out: Int32Array, at: number): void {
    const P = this.pageSize;
    let page = -1;
    for (let i = 0; i < count; i++) {
      const s = i % P;
      if (s === 0) {
        page = this.pages.allocPage(head);
        this.kind[page] = AUDIO;
      }
      out[at + i] = page * P + s;
      this.live[page]++;
    }
    if (count % P !== 0) {
      for (let s = count % P; s < P; s++) this.holes[head].push(page * P + s);
    }
  }

  /**
   * Audio slots for a recall, written into `out[0..count)` in ascending order (runs within
   * a page are then written with one call): holes in the head's audio pages first, then
   * fresh pages. A head's audio page count therefore never exceeds ceil(peak live
   * positions / pageSize).
   */
  allocAudio(head: number, count: number, out: Int32Array): void {
    const holes = this.holes[head];
    let n = 0;
    while (n < count && holes.length > 0) {
      const slot = holes.pop()!;
      // A hole listed twice (its page freed and taken again by the head) is taken once: the
      // first take marks it, and the caller's positions replace the mark.
      if (!this.isHole(head, slot)) continue;
      this.positions[slot] = TAKEN;
      this.live[Math.floor(slot / this.pageSize)]++;
      out[n++] = slot;
    }
    // Holes are listed ascending as a release frees them and taken from the end: reversed,
    // they are in order but where two releases' lists meet, so the sort below moves few.
    for (let i = 0, j = n - 1; i < j; i++, j--) {
      const x = out[i];
      out[i] = out[j];
      out[j] = x;
    }
    this.fillDense(head, count - n, out, n);
    // Fresh pages come ascending: a recall's few are put in order in place, a long one by
    // the typed array's sort.
    if (count > 64) out.subarray(0, count).sort();
    else
      for (let i = 1; i < count; i++) {
        const x = out[i];
        let j = i - 1;
        while (j >= 0 && out[j] > x) out[j + 1] = out[j--];
        out[j + 1] = x;
      }
  }

  /** Holes allocAudio can fill: distinct empty slots of the head's own audio pages. */
  usableHoles(head: number): number {
    const holes = this.holes[head];
    let n = 0;
    // Each distinct hole counted once: marked as counted, then emptied again.
    for (const slot of holes)
      if (this.isHole(head, slot)) {
        this.positions[slot] = TAKEN;
        n++;
      }
    for (const slot of holes) if (this.positions[slot] === TAKEN) this.positions[slot] = EMPTY;
    return n;
  }

  /**
   * Empties `slots` (audio slots of `head`): a page left without a live slot goes back to
   * the pool, the others' slots become holes. All are emptied before any page is looked at,
   * so a released segment's page is freed whole, its slots never listed as holes.
   */
  free(head: number, slots: ArrayLike<number>, count = slots.length): void {
    const P = this.pageSize;
    for (let i = 0; i < count; i++) {
      this.positions[slots[i]] = EMPTY;
      this.live[Math.floor(slots[i] / P)]--;
    }
    for (let i = 0; i < count; i++) {
      const page = Math.floor(slots[i] / P);
      if (this.live[page] > 0) this.holes[head].push(slots[i]);
      else if (this.kind[page] === AUDIO) {
        this.pages.freePage(head, page);
        this.kind[page] = FREE;
      }
    }
  }

  /** A shard of `pages` fresh pages for heads [firstHead, firstHead + heads), after every existing page. */
  addShard(firstHead: number, heads: number, pages: number): PoolShard {
    const s = this.pages.addShard(firstHead, heads, pages);
    const extend = <T extends Int32Array | Uint8Array>(a: T, n: number, fill: number, make: (n: number) => T): T => {
      const b = make(n);
      b.fill(fill);
      b.set(a);
      return b;
    };
    this.positions = extend(this.positions, this.pages.numPages * this.pageSize, EMPTY, (n) => new Int32Array(n));
    this.live = extend(this.live, this.pages.numPages, 0, (n) => new Int32Array(n));
    this.kind = extend(this.kind, this.pages.numPages, FREE, (n) => new Uint8Array(n));
    return s;
  }

  /**
   * Grows the pool by `add[s]` pages in shard s and moves the pages' slots to the shards'
   * new page ids; returns the shards as they were and, per head, the slot shift its own
   * slots took (the caller moves what it keeps of them).
   */
  grow(add: Int32Array): { before: PoolShard[]; shiftOf: (head: number) => number } {
    const before = this.pages.shards.map((s) => ({ ...s }));
    const shifts = this.pages.grow(add);
    const P = this.pageSize;
    const pages = this.pages.numPages;
    this.positions = movePages(this.positions, before, shifts, P, new Int32Array(pages * P).fill(EMPTY));
    this.live = movePages(this.live, before, shifts, 1, new Int32Array(pages));
    this.kind = movePages(this.kind, before, shifts, 1, new Uint8Array(pages));
    const shiftOf = (h: number) => {
      const shard = this.pages.shardIndexOf(h);
      return shard === -1 ? 0 : shifts[shard] * P;
    };
    this.holes.forEach((holes, h) => {
      const d = shiftOf(h);
      if (!d) return;
      for (let i = 0; i < holes.length; i++) holes[i] += d;
      if (this.textTail[h] !== EMPTY) this.textTail[h] += d;
      const text = this.textSlots[h];
      for (let i = 0; i < this.textCount[h]; i++) text[i] += d;
    });
    return { before, shiftOf };
  }

  private isHole(head: number, slot: number): boolean {
    const page = Math.floor(slot / this.pageSize);
    return this.pages.ownerOf(page) === head && this.kind[page] === AUDIO && this.positions[slot] === EMPTY;
  }
}
