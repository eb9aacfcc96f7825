/**
 * CPU offload memory: K and V rows of offloaded audio positions, per KV head, kept in
 * fixed-size ArrayBuffer chunks (one ArrayBuffer is capped near 2 GB in browsers, and
 * fixed chunks never need reallocation). A row is addressed by (head, position).
 * With 2-byte elements (an f16 pool) rows are kept as f16 bits: the pool rounds to f16
 * anyway, so a recall restores exactly what it held, in half the CPU memory.
 *
 * A chunk holds its keys and its values in two planes, as the pool's pages do: a recall of
 * positions whose rows follow one another (a head's segment, put in position order at
 * prefill) is one run of each plane's bytes (`run`), copied once into the pool's upload, never row by row.
 */
import { f16Bits, f16Table } from '../model/f16.js';

/**
 * Consecutive rows of a store's chunk as its bytes (f32, or f16 bits: the pool's own
 * element format): the keys from byte `k`, the values from byte `v`, `length` bytes each.
 */
export interface StoredRun {
  bytes: Uint8Array;
  k: number;
  v: number;
  length: number;
}

const NONE = -1;

export class OffloadStore {
  private readonly chunks: (Float32Array | Uint16Array)[] = [];
  /** Each chunk's bytes, viewed once. */
  private readonly chunkBytes: Uint8Array[] = [];
  /** What `run` returns, reused: a recall views hundreds of runs a step. */
  private readonly cursor: StoredRun = { bytes: new Uint8Array(0), k: 0, v: 0, length: 0 };
  private readonly rowsPerChunk: number;
  /** Per head (made on its first put), per position: the row holding it, or NONE. */
  private readonly rowOf: (Int32Array | undefined)[] = [];
  private count = 0;
  private freeRows: number[] = [];
  private nextRow = 0;

  /** A row is 2 * headDim elements (key then value) of `elementBytes` (4: f32, 2: f16). */
  constructor(
    readonly headDim: number,
    private readonly audioLength: number,
    chunkBytes = 16 * 2 ** 20,
    readonly elementBytes = 4,
  ) {
    this.rowsPerChunk = Math.max(1, Math.floor(chunkBytes / (2 * elementBytes * headDim)));
  }

  get rows(): number {
    return this.count;
  }

  get bytes(): number {
    return this.count * 2 * this.elementBytes * this.headDim;
  }

  /** Bytes of the ArrayBuffers the store holds (its chunks, rows in use or free). */
  get allocatedBytes(): number {
    return this.chunks.reduce((n, c) => n + c.byteLength, 0);
  }

  has(head: number, pos: number): boolean {
    const rows = this.rowOf[head];
    return rows !== undefined && rows[pos] !== NONE;
  }

  private rowIn(head: number, pos: number): number {
    const rows = this.rowOf[head];
    const row = rows === undefined ? NONE : rows[pos];
    if (row === NONE) throw new Error(`no CPU copy of head ${head} position ${pos}`);
    return row;
  }

  /** Copies one K row and one V row in (copy-out from the GPU side's point of view). */
  put(head: number, pos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number): void {
    const rows = (this.rowOf[head] ??= new Int32Array(this.audioLength).fill(NONE));
    let row = rows[pos];
    if (row === NONE) {
      row = this.freeRows.pop() ?? this.nextRow++;
      rows[pos] = row;
      this.count++;
    }
    const { chunk, k: ko, v: vo } = this.locate(row, true);
    const hd = this.headDim;
    if (chunk instanceof Uint16Array) {
      for (let d = 0; d < hd; d++) {
        chunk[ko + d] = f16Bits(k[kOff + d]);
        chunk[vo + d] = f16Bits(v[vOff + d]);
      }
      return;
    }
    chunk.set(k.subarray(kOff, kOff + hd), ko);
    chunk.set(v.subarray(vOff, vOff + hd), vo);
  }

  /** Copies one row out into k/v at the given offsets (recall). */
  get(head: number, pos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number): void {
    const { chunk, k: ko, v: vo } = this.locate(this.rowIn(head, pos), false);
    const hd = this.headDim;
    if (chunk instanceof Uint16Array) {
      const t = f16Table();
      for (let d = 0; d < hd; d++) {
        k[kOff + d] = t[chunk[ko + d]];
        v[vOff + d] = t[chunk[vo + d]];
      }
      return;
    }
    k.set(chunk.subarray(ko, ko + hd), kOff);
    v.set(chunk.subarray(vo, vo + hd), vOff);
  }

  /**
   * Copies one row's f16 bits out, as a store of 2-byte elements keeps them: a recall into
   * an f16 pool moves them as they are, with no conversion to f32 and back.
   */
  getBits(head: number, pos: number, k: Uint16Array, kOff: number, v: Uint16Array, vOff: number): void {
    const { chunk, k: ko, v: vo } = this.locate(this.rowIn(head, pos), false);
    if (!(chunk instanceof Uint16Array)) throw new Error('getBits reads a store of f16 rows (elementBytes 2)');
    const hd = this.headDim;
    k.set(chunk.subarray(ko, ko + hd), kOff);
    v.set(chunk.subarray(vo, vo + hd), vOff);
  }

  /**
   * How many of `positions[from..from + max)` lie in rows that follow the first one's in its
   * chunk (at least 1): the length of the next run `run` can view.
   */
  runLength(head: number, positions: ArrayLike<number>, from: number, max: number): number {
    const rows = this.rowOf[head];
    const first = this.rowIn(head, positions[from]);
    const end = Math.min(max, this.rowsPerChunk - (first % this.rowsPerChunk));
    let n = 1;
    while (n < end && rows![positions[from + n]] === first + n) n++;
    return n;
  }

  /**
   * The keys and values of `count` rows from `pos`'s on, in place (no copy): valid until
   * the next `run` or write of the store. `count` must come from `runLength`.
   */
  run(head: number, pos: number, count: number): StoredRun {
    const row = this.rowIn(head, pos);
    const c = Math.floor(row / this.rowsPerChunk);
    const rowBytes = this.headDim * this.elementBytes;
    const r = this.cursor;
    r.bytes = this.chunkBytes[c];
    r.k = (row % this.rowsPerChunk) * rowBytes;
    r.v = r.k + this.rowsPerChunk * rowBytes;
    r.length = count * rowBytes;
    return r;
  }

  delete(head: number, pos: number): void {
    const rows = this.rowOf[head];
    const row = rows?.[pos] ?? NONE;
    if (row === NONE) return;
    rows![pos] = NONE;
    this.count--;
    this.freeRows.push(row);
  }

  clear(): void {
    this.rowOf.length = 0;
    this.count = 0;
    this.freeRows = [];
    this.nextRow = 0;
  }

  /** A row's chunk and the offsets of its key and its value there. */
  private locate(row: number, grow: boolean): { chunk: Float32Array | Uint16Array; k: number; v: number } {
    const c = Math.floor(row / this.rowsPerChunk);
    const plane = this.rowsPerChunk * this.headDim;
    while (grow && this.chunks.length <= c) {
      const chunk = this.elementBytes === 2 ? new Uint16Array(2 * plane) : new Float32Array(2 * plane);
      this.chunks.push(chunk);
      this.chunkBytes.push(new Uint8Array(chunk.buffer));
    }
    const k = (row % this.rowsPerChunk) * this.headDim;
    return { chunk: this.chunks[c], k, v: plane + k };
  }
}
