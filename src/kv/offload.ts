/**
 * CPU offload memory: K and V rows of offloaded audio positions, per KV head, kept in
 * fixed-size ArrayBuffer chunks (one ArrayBuffer is capped near 2 GB in browsers, and
 * fixed chunks never need reallocation). A row is addressed by (head, position).
 * With 2-byte elements (an f16 pool) rows are kept as f16 bits: the pool rounds to f16
 * anyway, so a recall restores exactly what it held, in half the CPU memory.
 */
import { f16Bits, f16Table } from '../model/f16.js';

export class OffloadStore {
  private readonly chunks: (Float32Array | Uint16Array)[] = [];
  private readonly rowsPerChunk: number;
  private readonly index = new Map<number, number>(); // key(head, pos) -> row
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

  private key(head: number, pos: number): number {
    return head * this.audioLength + pos;
  }

  get rows(): number {
    return this.index.size;
  }

  get bytes(): number {
    return this.index.size * 2 * this.elementBytes * this.headDim;
  }

  /** Bytes of the ArrayBuffers the store holds (its chunks, rows in use or free). */
  get allocatedBytes(): number {
    return this.chunks.reduce((n, c) => n + c.byteLength, 0);
  }

  has(head: number, pos: number): boolean {
    return this.index.has(this.key(head, pos));
  }

  /** Copies one K row and one V row in (copy-out from the GPU side's point of view). */
  put(head: number, pos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number): void {
    const key = this.key(head, pos);
    let row = this.index.get(key);
    if (row === undefined) {
      row = this.freeRows.pop() ?? this.nextRow++;
      this.index.set(key, row);
    }
    const { chunk, off } = this.locate(row, true);
    const hd = this.headDim;
    if (chunk instanceof Uint16Array) {
      for (let d = 0; d < hd; d++) {
        chunk[off + d] = f16Bits(k[kOff + d]);
        chunk[off + hd + d] = f16Bits(v[vOff + d]);
      }
      return;
    }
    chunk.set(k.subarray(kOff, kOff + hd), off);
    chunk.set(v.subarray(vOff, vOff + hd), off + hd);
  }

  /** Copies one row out into k/v at the given offsets (recall). */
  get(head: number, pos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number): void {
    const row = this.index.get(this.key(head, pos));
    if (row === undefined) throw new Error(`no CPU copy of head ${head} position ${pos}`);
    const { chunk, off } = this.locate(row, false);
    const hd = this.headDim;
    if (chunk instanceof Uint16Array) {
      const t = f16Table();
      for (let d = 0; d < hd; d++) {
        k[kOff + d] = t[chunk[off + d]];
        v[vOff + d] = t[chunk[off + hd + d]];
      }
      return;
    }
    k.set(chunk.subarray(off, off + hd), kOff);
    v.set(chunk.subarray(off + hd, off + 2 * hd), vOff);
  }

  /**
   * Copies one row's f16 bits out, as a store of 2-byte elements keeps them: a recall into
   * an f16 pool moves them as they are, with no conversion to f32 and back.
   */
  getBits(head: number, pos: number, k: Uint16Array, kOff: number, v: Uint16Array, vOff: number): void {
    const row = this.index.get(this.key(head, pos));
    if (row === undefined) throw new Error(`no CPU copy of head ${head} position ${pos}`);
    const { chunk, off } = this.locate(row, false);
    if (!(chunk instanceof Uint16Array)) throw new Error('getBits reads a store of f16 rows (elementBytes 2)');
    const hd = this.headDim;
    k.set(chunk.subarray(off, off + hd), kOff);
    v.set(chunk.subarray(off + hd, off + 2 * hd), vOff);
  }

  delete(head: number, pos: number): void {
    const key = this.key(head, pos);
    const row = this.index.get(key);
    if (row === undefined) return;
    this.index.delete(key);
    this.freeRows.push(row);
  }

  clear(): void {
    this.index.clear();
    this.freeRows = [];
    this.nextRow = 0;
  }

  private locate(row: number, grow: boolean): { chunk: Float32Array | Uint16Array; off: number } {
    const c = Math.floor(row / this.rowsPerChunk);
    const n = this.rowsPerChunk * 2 * this.headDim;
    while (grow && this.chunks.length <= c)
      this.chunks.push(this.elementBytes === 2 ? new Uint16Array(n) : new Float32Array(n));
    return { chunk: this.chunks[c], off: (row % this.rowsPerChunk) * 2 * this.headDim };
  }
}
