/**
 * Rows written into the pool during decode (recalled segments, summary slots) are staged
 * here instead of written one queue.writeBuffer per run of rows: they are copied into a
 * mapped upload buffer as the plan is applied, and the next step's own command encoder
 * copies each run into its pages before the step's compute pass, so a step with recalls is
 * still one submit and no write for its rows. The pool's changed position and page-table
 * entries ride the same upload (`addWords`): a step whose text took a new page in every
 * head changes one table run per head.
 *
 * Two uploads are taken in turn (one may still be read by the step in flight). A buffer is
 * mapped anew once the submit that reads it is made (`submitted`), so the page copies a
 * recalled row once, where a `writeBuffer` from an array would copy its megabytes again.
 * Rows staged while neither is mapped, or past the mapped range, are written directly (as
 * before), so a large recall never fails or allocates mid-decode.
 *
 * Only as much is mapped as the steps have staged (`mapBytes`: the most one step has asked
 * for, with a quarter more, up to the capacity): Chromium hands the whole mapped range to
 * its GPU process after the unmap, however few bytes were written into it. A step that
 * asked for more than was mapped has the next maps larger.
 */
import type { GpuContext } from '../../gpu/device.js';
import { packF16 } from '../../kv/precision.js';
import type { StoredRun } from '../../kv/offload.js';

interface Run {
  shard: number;
  /** Byte offset in the shard's K and V buffers (the same for both). */
  dst: number;
  /** Byte offset of the K run in the upload; V follows it. */
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

/** Upload buffers taken in turn. */
const UPLOADS = 2;

/** The mapped range before any step has staged: 1 MiB, a few hundred recalled rows. */
const FIRST_MAP = 2 ** 20;

interface Upload {
  buffer: GPUBuffer;
  /** Mapped and not yet written this turn. */
  ready: boolean;
  /** Bytes of its mapped range. */
  size: number;
}

export class RowStaging {
  /** The mapped range of `uploads[current]` this step writes into; null until a step's first row. */
  private data: Uint8Array | null = null;
  private current = -1;
  /** The upload the last encode unmapped, to map again once its submit is made. */
  private sent = -1;
  private used = 0;
  private runs: Run[] = [];
  private runCount = 0;
  private words: WordRun[] = [];
  private wordCount = 0;
  private readonly uploads: Upload[] = [];
  private half = new Uint16Array(0);
  /** Bytes an upload maps from now on. */
  private mapBytes: number;
  /** Bytes this step asked to stage, those refused for want of a mapped range included. */
  private asked = 0;

  constructor(
    private readonly ctx: GpuContext,
    readonly capacity: number,
  ) {
    this.mapBytes = Math.min(capacity, FIRST_MAP);
    for (let i = 0; i < UPLOADS; i++) {
      const u = {
        buffer: ctx.buffer('kv.staging', capacity, GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC),
        ready: false,
        size: 0,
      };
      this.uploads.push(u);
      this.map(u);
    }
  }

  private map(u: Upload): void {
    u.size = this.mapBytes;
    u.buffer.mapAsync(GPUMapMode.WRITE, 0, u.size).then(
      () => (u.ready = true),
      // A destroyed buffer or a lost device: never ready, rows go up directly.
      () => {},
    );
  }

  /** The bytes this step stages into, taking a mapped upload at its first row; null where none is mapped. */
  private target(): Uint8Array | null {
    if (this.data) return this.data;
    const i = this.uploads.findIndex((u) => u.ready);
    if (i < 0) return null;
    this.uploads[i].ready = false;
    this.current = i;
    this.data = new Uint8Array(this.uploads[i].buffer.getMappedRange(0, this.uploads[i].size));
    return this.data;
  }

  /** Stages `n` key and value elements for a shard at byte offset `dst`; false when they do not fit. */
  add(shard: number, dst: number, n: number, elementBytes: number, k: Float32Array, v: Float32Array): boolean {
    const bytes = n * elementBytes;
    const data = this.fits(dst, bytes);
    if (!data) return false;
    const put = (src: Float32Array, at: number) => {
      if (elementBytes === 4) data.set(new Uint8Array(src.buffer, src.byteOffset, bytes), at);
      else {
        if (this.half.length < n) this.half = new Uint16Array(n);
        data.set(new Uint8Array(packF16(src, n, this.half).buffer, 0, bytes), at);
      }
    };
    put(k, this.used);
    put(v, this.used + bytes);
    this.pushRun(shard, dst, bytes);
    return true;
  }

  /** Stages rows as the offload store keeps them (the pool's element format), copied as they are; false when they do not fit. */
  addRun(shard: number, dst: number, run: StoredRun): boolean {
    const bytes = run.length;
    const data = this.fits(dst, bytes);
    if (!data) return false;
    data.set(run.bytes.subarray(run.k, run.k + bytes), this.used);
    data.set(run.bytes.subarray(run.v, run.v + bytes), this.used + bytes);
    this.pushRun(shard, dst, bytes);
    return true;
  }

  /** Where a K and a V run of `bytes` each go this step, or null where they cannot be staged. */
  private fits(dst: number, bytes: number): Uint8Array | null {
    // Copies move 4-byte multiples: a run of f16 rows is whole rows of even head_dim.
    if (bytes % 4 !== 0 || dst % 4 !== 0) return null;
    return this.room(2 * bytes);
  }

  /** The mapped range where `bytes` more fit, counted as asked for either way. */
  private room(bytes: number): Uint8Array | null {
    this.asked += bytes;
    const data = this.target();
    return data && this.used + bytes <= data.length ? data : null;
  }

  private pushRun(shard: number, dst: number, bytes: number): void {
    // Runs are reused across steps, as word runs are.
    const run = this.runs[this.runCount] ?? (this.runs[this.runCount] = { shard, dst, src: 0, bytes });
    run.shard = shard;
    run.dst = dst;
    run.src = this.used;
    run.bytes = bytes;
    this.runCount++;
    this.used += 2 * bytes;
  }

  /** Stages `count` 4-byte words of `from` (from word `first` on) for `dst` at byte `at`; false when they do not fit. */
  addWords(dst: GPUBuffer, at: number, from: Int32Array | Uint32Array, first: number, count: number): boolean {
    const bytes = count * 4;
    const data = this.room(bytes);
    if (!data) return false;
    data.set(new Uint8Array(from.buffer, from.byteOffset + first * 4, bytes), this.used);
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

  /**
   * The staged upload unmapped and its copies into the shards' K/V recorded on `enc`; the
   * caller says `submitted` once the submit holding `enc` is made.
   */
  encode(enc: GPUCommandEncoder, k: readonly GPUBuffer[], v: readonly GPUBuffer[]): void {
    const refused = this.asked > this.used;
    if (refused)
      this.mapBytes = Math.min(this.capacity, Math.max(this.mapBytes, Math.ceil((this.asked * 1.25) / 4) * 4));
    this.asked = 0;
    // A taken upload too small for this step is mapped again at the new size, used or not.
    if (this.used === 0 && !(refused && this.data)) return;
    const buffer = this.uploads[this.current].buffer;
    buffer.unmap();
    for (let i = 0; i < this.runCount; i++) {
      const r = this.runs[i];
      enc.copyBufferToBuffer(buffer, r.src, k[r.shard], r.dst, r.bytes);
      enc.copyBufferToBuffer(buffer, r.src + r.bytes, v[r.shard], r.dst, r.bytes);
    }
    for (let i = 0; i < this.wordCount; i++) {
      const w = this.words[i];
      enc.copyBufferToBuffer(buffer, w.src, w.dst, w.at, w.bytes);
    }
    this.sent = this.current;
    this.data = null;
    this.runCount = 0;
    this.wordCount = 0;
    this.used = 0;
  }

  /** The submit that reads the last encoded upload is made: map it for a later step. */
  submitted(): void {
    if (this.sent < 0) return;
    this.map(this.uploads[this.sent]);
    this.sent = -1;
  }

  destroy(): void {
    for (const u of this.uploads) this.ctx.destroy(u.buffer);
  }
}
