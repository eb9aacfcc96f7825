/**
 * The page tables as the decode kernels read them, and what of them a flush uploads.
 * meta[4h..4h+3] = (offset of head h's page list in the array, page count, export index or
 * NO_EXPORT, 0), then each head's list from its offset. Each list has room for
 * TABLE_SLACK more pages than it held when the lists were last laid out, so a page added to
 * one head (a text page every pageSize tokens, for every head) moves no other head's list:
 * a flush writes the entries that changed, a few bytes, where a packed table shifted every
 * later head's list and was written whole (tens of KB at 10 minutes of audio).
 */
import { UNCHANGED } from '../../kv/page-allocator.js';

/** Spare entries after each head's list: a head outgrowing them lays every list out anew (written whole). */
export const TABLE_SLACK = 16;

/** Entries of the table buffer for `heads` heads over `capacityPages` pages, slack included. */
export function tableEntries(heads: number, capacityPages: number): number {
  return heads * 4 + capacityPages + heads * TABLE_SLACK;
}

/** Entries closer than this to the next changed run are written with it: fewer writes, few wasted bytes. */
const MERGE_GAP = 8;

/** The tables and what changed in them since the last update (PageAllocator's change record). */
export interface TableSource {
  pageTable(h: number): readonly number[];
  readonly changedFrom: Int32Array;
  readonly changedCount: number;
}

export class PageTables {
  /** What the GPU's buffer holds (valid where `fresh` is false). */
  private uploaded: Uint32Array;
  private next: Uint32Array;
  /** Per head: where its list starts, and how many pages it may hold there. */
  private readonly offset: Uint32Array;
  private readonly room: Uint32Array;
  /** The buffer's contents are unknown (new, or the lists just moved): everything used is written. */
  private fresh = true;
  private end = 0;
  /** The last update's runs, [first, end) pairs back to back (reused: a step allocates none). */
  readonly runs: number[] = [];

  constructor(
    private readonly heads: number,
    entries: number,
    private readonly exportIndex: ArrayLike<number>,
  ) {
    this.uploaded = new Uint32Array(entries);
    this.next = new Uint32Array(entries);
    this.offset = new Uint32Array(heads);
    this.room = new Uint32Array(heads);
  }

  /** The whole table as the last update left it (the runs index it). */
  get data(): Uint32Array {
    return this.next;
  }

  /** Whether the next update has something to write whatever changed (a new buffer, lists laid out anew). */
  get pending(): boolean {
    return this.fresh;
  }

  /**
   * Brings the table to `src`'s page lists; returns how many runs of entries (`runs`, in
   * the order of the array) the buffer needs written to hold it. Only the heads `src`
   * says changed are looked at, from their first changed entry on: a step that appended
   * one text page per head costs its new entries, not a pass over every page of the pool.
   */
  update(src: TableSource): number {
    const H = this.heads;
    const from = src.changedFrom;
    let fits = !this.fresh;
    for (let h = 0; h < H && fits && src.changedCount; h++)
      if (from[h] !== UNCHANGED) fits = src.pageTable(h).length <= this.room[h];
    if (!fits) this.layOut(src);
    const t = this.next;
    let n = 0;
    if (this.fresh) {
      for (let h = 0; h < H; h++) this.write(h, 0, src.pageTable(h));
      this.runs[0] = 0;
      this.runs[1] = this.end;
      n = 1;
      this.fresh = false;
    } else if (src.changedCount) {
      // Every head's meta lies before every list: ascending heads give ascending runs.
      for (let h = 0; h < H; h++) {
        if (from[h] === UNCHANGED) continue;
        const pages = src.pageTable(h);
        this.write(h, Math.min(from[h], pages.length), pages);
        n = this.changed(h * 4, h * 4 + 4, n);
      }
      for (let h = 0; h < H; h++) {
        if (from[h] === UNCHANGED) continue;
        const o = this.offset[h];
        const len = src.pageTable(h).length;
        n = this.changed(o + Math.min(from[h], len), o + len, n);
      }
    }
    for (let r = 0; r < n; r++) {
      const a = this.runs[2 * r];
      const b = this.runs[2 * r + 1];
      for (let i = a; i < b; i++) this.uploaded[i] = t[i];
    }
    return n;
  }

  /** A larger buffer holding this one's entries (copied on the GPU): lists stay where they are. */
  resize(entries: number): void {
    const grow = (a: Uint32Array) => {
      const b = new Uint32Array(entries);
      b.set(a.subarray(0, Math.min(a.length, entries)));
      return b;
    };
    this.uploaded = grow(this.uploaded);
    this.next = grow(this.next);
  }

  /** Head h's meta, and its list from entry `first` on, into `next`. */
  private write(h: number, first: number, pages: readonly number[]): void {
    const t = this.next;
    t[h * 4] = this.offset[h];
    t[h * 4 + 1] = pages.length;
    t[h * 4 + 2] = this.exportIndex[h];
    t[h * 4 + 3] = 0;
    const o = this.offset[h];
    for (let i = first; i < pages.length; i++) t[o + i] = pages[i];
  }

  private layOut(src: { pageTable(h: number): readonly number[] }): void {
    let off = this.heads * 4;
    for (let h = 0; h < this.heads; h++) {
      this.offset[h] = off;
      this.room[h] = src.pageTable(h).length + TABLE_SLACK;
      off += this.room[h];
    }
    if (off > this.next.length)
      throw new RangeError(`page tables need ${off} entries, the buffer holds ${this.next.length}`);
    this.end = off;
    this.fresh = true;
  }

  /** Adds to the `n` runs so far the entries of [a, b) that differ from what was uploaded, close runs merged; returns the count. */
  private changed(a: number, b: number, n: number): number {
    const t = this.next;
    const u = this.uploaded;
    const runs = this.runs;
    for (let i = a; i < b; i++) {
      if (t[i] === u[i]) continue;
      let j = i + 1;
      while (j < b && t[j] !== u[j]) j++;
      if (n > 0 && i - runs[2 * n - 1] < MERGE_GAP) runs[2 * n - 1] = j;
      else {
        runs[2 * n] = i;
        runs[2 * n + 1] = j;
        n++;
      }
      i = j;
    }
    return n;
  }
}
