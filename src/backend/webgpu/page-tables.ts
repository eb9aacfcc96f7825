/**
 * The page tables as the decode kernels read them, and what of them a flush uploads.
 * meta[4h..4h+3] = (offset of head h's page list in the array, page count, export index or
 * NO_EXPORT, 0), then each head's list from its offset. Each list has room for
 * TABLE_SLACK more pages than it held when the lists were last laid out, so a page added to
 * one head (a text page every pageSize tokens, for every head) moves no other head's list:
 * a flush writes the entries that changed, a few bytes, where a packed table shifted every
 * later head's list and was written whole (tens of KB at 10 minutes of audio).
 */

/** Spare entries after each head's list: a head outgrowing them lays every list out anew (written whole). */
export const TABLE_SLACK = 16;

/** Entries of the table buffer for `heads` heads over `capacityPages` pages, slack included. */
export function tableEntries(heads: number, capacityPages: number): number {
  return heads * 4 + capacityPages + heads * TABLE_SLACK;
}

/** Entries closer than this to the next changed run are written with it: fewer writes, few wasted bytes. */
const MERGE_GAP = 8;

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

  /**
   * The table for `res`'s page lists, as runs [first, end) of entries to write (in the
   * order of the array) after which the buffer holds it; `data` is the whole table.
   */
  update(res: { pageTable(h: number): readonly number[] }): { data: Uint32Array; runs: [number, number][] } {
    const H = this.heads;
    let fits = !this.fresh;
    for (let h = 0; h < H && fits; h++) fits = res.pageTable(h).length <= this.room[h];
    if (!fits) this.layOut(res);
    const t = this.next;
    for (let h = 0; h < H; h++) {
      const pages = res.pageTable(h);
      t[h * 4] = this.offset[h];
      t[h * 4 + 1] = pages.length;
      t[h * 4 + 2] = this.exportIndex[h];
      t[h * 4 + 3] = 0;
      const o = this.offset[h];
      for (let i = 0; i < pages.length; i++) t[o + i] = pages[i];
    }
    const runs: [number, number][] = [];
    if (this.fresh) {
      runs.push([0, this.end]);
      this.fresh = false;
    } else {
      this.changed(0, H * 4, runs);
      for (let h = 0; h < H; h++) this.changed(this.offset[h], this.offset[h] + res.pageTable(h).length, runs);
    }
    for (const [a, b] of runs) this.uploaded.set(t.subarray(a, b), a);
    return { data: t, runs };
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

  private layOut(res: { pageTable(h: number): readonly number[] }): void {
    let off = this.heads * 4;
    for (let h = 0; h < this.heads; h++) {
      this.offset[h] = off;
      this.room[h] = res.pageTable(h).length + TABLE_SLACK;
      off += this.room[h];
    }
    if (off > this.next.length)
      throw new RangeError(`page tables need ${off} entries, the buffer holds ${this.next.length}`);
    this.end = off;
    this.fresh = true;
  }

  /** Appends to `runs` the entries of [a, b) that differ from what was uploaded, close runs merged. */
  private changed(a: number, b: number, runs: [number, number][]): void {
    const t = this.next;
    const u = this.uploaded;
    for (let i = a; i < b; i++) {
      if (t[i] === u[i]) continue;
      let j = i + 1;
      while (j < b && t[j] !== u[j]) j++;
      const last = runs[runs.length - 1];
      if (last && i - last[1] < MERGE_GAP) last[1] = j;
      else runs.push([i, j]);
      i = j;
    }
  }
}
