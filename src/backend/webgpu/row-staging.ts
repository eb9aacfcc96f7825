/**
 * Rows written into the pool during decode (recalled segments, summary slots) are staged
 * here instead of written one queue.writeBuffer per run of rows: at the next step's submit
 * the staged bytes go up in one writeBuffer and the step's own command encoder copies each
 * run into its pages before the step's compute pass, so a step with recalls is still one
 * submit and a handful of queue writes. Rows that do not fit the staging buffer this step
 * are written directly (as before), so a large recall never fails or allocates mid-decode.
 * The pool's changed position and page-table entries ride the same upload (`addWords`):
 * a step whose text took a new page in every head changes one table run per head.
 */
import type { GpuContext } from '../../gpu/device.js';
import { packF16 } from '../../kv/precision.js';

interface Run {
  shard: number;
  /** Byte offset in the shard's K and V buffers (the same for both). */
  dst: number;
  /** Byte offset of the K run in the staging buffer; V follows it. */
  src: number;
  bytes: number;
}

/** Words staged for any buffer (positions, page tables). */
interface WordRun {
  dst: GPUBuffer;
  at: number;
  src: number;
  bytes: number;
}

export class RowStaging {
  private readonly data: Uint8Array;
  private used = 0;
  private runs: Run[] = [];
  private words: WordRun[] = [];
  private wordCount = 0;
  private readonly buffer: GPUBuffer;
  private half = new Uint16Array(0);

  constructor(
    private readonly ctx: GpuContext,
    readonly capacity: number,
  ) {
    this.data = new Uint8Array(capacity);
    this.buffer = ctx.buffer('kv.staging', capacity, GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
  }

  /** Stages `n` key and value elements for a shard at byte offset `dst`; false when they do not fit. */
  add(shard: number, dst: number, n: number, elementBytes: number, k: Float32Array, v: Float32Array): boolean {
    const bytes = n * elementBytes;
    if (!this.fits(dst, bytes)) return false;
    const put = (src: Float32Array, at: number) => {
      if (elementBytes === 4) this.data.set(new Uint8Array(src.buffer, src.byteOffset, bytes), at);
      else {
        if (this.half.length < n) this.half = new Uint16Array(n);
        this.data.set(new Uint8Array(packF16(src, n, this.half).buffer, 0, bytes), at);
      }
    };
    put(k, this.used);
    put(v, this.used + bytes);
    this.pushRun(shard, dst, bytes);
    return true;
  }

  /** Stages `n` key and value elements given as f16 bits (an f16 pool's), copied as they are; false when they do not fit. */
  addBits(shard: number, dst: number, n: number, k: Uint16Array, v: Uint16Array): boolean {
    const bytes = n * 2;
    if (!this.fits(dst, bytes)) return false;
    this.data.set(new Uint8Array(k.buffer, k.byteOffset, bytes), this.used);
    this.data.set(new Uint8Array(v.buffer, v.byteOffset, bytes), this.used + bytes);
    this.pushRun(shard, dst, bytes);
    return true;
  }

  private fits(dst: number, bytes: number): boolean {
    // Copies move 4-byte multiples: a run of f16 rows is whole rows of even head_dim.
    return this.used + 2 * bytes <= this.capacity && bytes % 4 === 0 && dst % 4 === 0;
  }

  private pushRun(shard: number, dst: number, bytes: number): void {
    this.runs.push({ shard, dst, src: this.used, bytes });
    this.used += 2 * bytes;
  }

  /** Stages `count` 4-byte words of `from` (from word `first` on) for `dst` at byte `at`; false when they do not fit. */
  addWords(dst: GPUBuffer, at: number, from: Int32Array | Uint32Array, first: number, count: number): boolean {
    const bytes = count * 4;
    if (this.used + bytes > this.capacity) return false;
    this.data.set(new Uint8Array(from.buffer, from.byteOffset + first * 4, bytes), this.used);
    // Runs are reused across steps: a step stages no new objects once the pool's changes are steady.
    const run = this.words[this.wordCount] ?? (this.words[this.wordCount] = { dst, at, src: 0, bytes: 0 });
    run.dst = dst;
    run.at = at;
    run.src = this.used;
    run.bytes = bytes;
    this.wordCount++;
    this.used += bytes;
    return true;
  }

  get pending(): number {
    return this.used;
  }

  /** One upload of what is staged, and its copies into the shards' K/V recorded on `enc`. */
  encode(enc: GPUCommandEncoder, k: readonly GPUBuffer[], v: readonly GPUBuffer[]): void {
    if (this.used === 0) return;
    this.ctx.device.queue.writeBuffer(this.buffer, 0, this.data.buffer, this.data.byteOffset, this.used);
    for (const r of this.runs) {
      enc.copyBufferToBuffer(this.buffer, r.src, k[r.shard], r.dst, r.bytes);
      enc.copyBufferToBuffer(this.buffer, r.src + r.bytes, v[r.shard], r.dst, r.bytes);
    }
    for (let i = 0; i < this.wordCount; i++) {
      const w = this.words[i];
      enc.copyBufferToBuffer(this.buffer, w.src, w.dst, w.at, w.bytes);
    }
    this.runs = [];
    this.wordCount = 0;
    this.used = 0;
  }

  destroy(): void {
    this.ctx.destroy(this.buffer);
  }
}
