/**
 * CPU offload memory: K and V rows of offloaded audio positions, per KV head, kept in
 * fixed-size ArrayBuffer chunks (one ArrayBuffer is capped near 2 GB in browsers, and
 * fixed chunks never need reallocation). A row is addressed by (head, position).
 */
export class OffloadStore {
  private readonly chunks: Float32Array[] = [];
  private readonly rowsPerChunk: number;
  private readonly index = new Map<number, number>(); // key(head, pos) -> row
  private freeRows: number[] = [];
  private nextRow = 0;

  /** rowFloats = 2 * headDim (key then value). */
  constructor(
    readonly headDim: number,
    private readonly audioLength: number,
    chunkBytes = 16 * 2 ** 20,
  ) {
    this.rowsPerChunk = Math.max(1, Math.floor(chunkBytes / (8 * headDim)));
  }

  private key(head: number, pos: number): number {
    return head * this.audioLength + pos;
  }

  get rows(): number {
    return this.index.size;
  }

  get bytes(): number {
    return this.index.size * 8 * this.headDim;
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
    chunk.set(k.subarray(kOff, kOff + hd), off);
    chunk.set(v.subarray(vOff, vOff + hd), off + hd);
  }

  /** Copies one row out into k/v at the given offsets (recall). */
  get(head: number, pos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number): void {
    const row = this.index.get(this.key(head, pos));
    if (row === undefined) throw new Error(`no CPU copy of head ${head} position ${pos}`);
    const { chunk, off } = this.locate(row, false);
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

  private locate(row: number, grow: boolean): { chunk: Float32Array; off: number } {
    const c = Math.floor(row / this.rowsPerChunk);
    while (grow && this.chunks.length <= c) this.chunks.push(new Float32Array(this.rowsPerChunk * 2 * this.headDim));
    return { chunk: this.chunks[c], off: (row % this.rowsPerChunk) * 2 * this.headDim };
  }
}
