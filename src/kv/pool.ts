/**
 * The KV pool allocator, in the spirit of vLLM's block manager: a fixed number of
 * pages of `pageSize` slots, one page table per KV head (flat head = layer *
 * numKvHeads + kvHead), and a free list. It knows nothing of policies, positions or
 * storage; backends own the bytes and mirror the page tables to wherever attention
 * reads them.
 *
 * Page size: the runtime uses WnW's segment length n_s = ceil(2 s * audio tokens/s)
 * (25 slots at 12.5 tokens/s). A recalled segment then fills exactly one page and its
 * release frees exactly that page, so the pool never fragments under WnW's
 * recall/release traffic; policies that keep scattered subsets pack them densely.
 */
import { ContextTooLongError } from '../errors.js';

export interface PoolShape {
  heads: number;
  pageSize: number;
  numPages: number;
  /** Bytes one page occupies (keys + values + positions), for accounting and errors. */
  bytesPerPage: number;
}

export class KvPool {
  readonly heads: number;
  readonly pageSize: number;
  readonly numPages: number;
  readonly bytesPerPage: number;
  private readonly tables: number[][];
  private readonly free: number[];
  private readonly owner: Int32Array;
  /** Bumped on every page-table change so a backend knows when to re-upload tables. */
  version = 0;

  constructor(shape: PoolShape) {
    if (shape.pageSize < 1 || shape.numPages < 1 || shape.heads < 1) {
      throw new RangeError(`invalid pool shape ${JSON.stringify(shape)}`);
    }
    this.heads = shape.heads;
    this.pageSize = shape.pageSize;
    this.numPages = shape.numPages;
    this.bytesPerPage = shape.bytesPerPage;
    this.tables = Array.from({ length: shape.heads }, () => []);
    // Pop from the end: pages come out in ascending order, which keeps tests readable.
    this.free = Array.from({ length: shape.numPages }, (_, i) => shape.numPages - 1 - i);
    this.owner = new Int32Array(shape.numPages).fill(-1);
  }

  get freePages(): number {
    return this.free.length;
  }

  get usedPages(): number {
    return this.numPages - this.free.length;
  }

  allocPage(head: number): number {
    const page = this.free.pop();
    if (page === undefined) {
      throw new ContextTooLongError(
        (this.numPages + 1) * this.bytesPerPage,
        this.numPages * this.bytesPerPage,
        `KV pool is full (${this.numPages} pages of ${this.pageSize} slots)`,
      );
    }
    this.owner[page] = head;
    this.tables[head].push(page);
    this.version++;
    return page;
  }

  freePage(head: number, page: number): void {
    if (this.owner[page] !== head) throw new Error(`page ${page} is not owned by head ${head}`);
    const t = this.tables[head];
    t.splice(t.indexOf(page), 1);
    this.owner[page] = -1;
    this.free.push(page);
    this.version++;
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
