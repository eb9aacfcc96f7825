/**
 * A decode step's writes into the KV pool on the GPU: the recalled rows (and summary slots)
 * into their pages, the changed positions and page-table entries into theirs, collected as
 * the plan is applied and the step is placed, and encoded by this object alone: one upload
 * copied into a storage landing buffer, then one `scatter_rows` dispatch per shard that has
 * rows (one a step for a pool of one shard), however many runs of rows the step moves.
 * A mapped upload can only be a copy source in WebGPU, hence the landing buffer.
 *
 * The landing buffer's first `INDEX_BYTES` hold the index table (src/reference/scatter-rows.ts
 * gives its layout and what the kernel does with it); the rows and words follow. The upload
 * holds the rows and words first and the step's index after them, written at the encode
 * from a table kept here, so a step maps and hands over only the entries it made. A run's
 * keys and values are staged back to back, as the kernel reads them.
 *
 * Two uploads are taken in turn (one may still be read by the step in flight). `encode`
 * answers an `EncodedWrites`, the only thing that can say its submit was made, after which
 * that upload is mapped again: the page copies a recalled row once, where a `writeBuffer`
 * from an array would copy its megabytes again. Rows staged while neither upload is mapped,
 * past the mapped range or past the index's entries are refused, and the pool writes them
 * directly, so a large recall never fails or allocates mid-decode.
 *
 * Only as much is mapped as the steps have staged (`mapBytes`: the most one step has asked
 * for, with a quarter more, up to the capacity): Chromium hands the whole mapped range to
 * its GPU process after the unmap, however few bytes were written into it.
 */
import type { GpuContext } from '../../gpu/device.js';
import { record, sharedUniforms, type Dispatch } from '../../gpu/op.js';
import { packF16 } from '../../kv/precision.js';
import type { StoredRun } from '../../kv/offload.js';
import {
  ENTRY_WORDS,
  INDEX_HEADER_WORDS,
  SCATTER_POSITIONS,
  SCATTER_TABLES,
  SCATTER_WORDS,
} from '../../reference/scatter-rows.js';
import { grid } from './groups.js';
import type { ScatterRows } from './ops.js';

/** Index entries a step stages at most: a run is at most a page, so 8,191 runs are 200,000 rows at 25 a page. */
export const MAX_ENTRIES = 8191;
/** Bytes of the index table at the landing buffer's start; rows and words follow. */
export const INDEX_BYTES = 4 * (INDEX_HEADER_WORDS + ENTRY_WORDS * MAX_ENTRIES);

/** Upload buffers taken in turn. */
const UPLOADS = 2;

/** The range mapped before any step has staged: 1 MiB, a few hundred recalled rows. */
const FIRST_MAP = 2 ** 20;

const ENTRY_BYTES = 4 * ENTRY_WORDS;
const INDEX_HEADER_BYTES = 4 * INDEX_HEADER_WORDS;

/** Bytes of an index table of `entries` entries. */
function indexBytes(entries: number): number {
  return INDEX_HEADER_BYTES + ENTRY_BYTES * entries;
}

/** Which buffer a run of words goes into. */
export type WordTarget = typeof SCATTER_POSITIONS | typeof SCATTER_TABLES;

/** The buffers a step's writes land in: per shard its K and V, and the pool-wide positions and tables. */
export interface WriteTargets {
  k: readonly GPUBuffer[];
  v: readonly GPUBuffer[];
  positions: GPUBuffer;
  tables: GPUBuffer;
}

interface Upload {
  buffer: GPUBuffer;
  /** Mapped and not yet written this turn. */
  ready: boolean;
  /** Bytes of its mapped range. */
  size: number;
}

/** A step's writes recorded on its encoder: once the submit holding it is made, `submitted` frees its upload for a later step. */
export class EncodedWrites {
  private done = false;

  constructor(private readonly release: () => void) {}

  submitted(): void {
    if (this.done) return;
    this.done = true;
    this.release();
  }
}

export class StepWrites {
  /** The mapped range of `uploads[current]`; null until the step's first write. */
  private data: Uint8Array | null = null;
  /** The step's index table, copied into the upload after its data at the encode. */
  private readonly index = new Uint32Array(INDEX_BYTES / 4);
  private current = -1;
  /** Bytes of rows and words staged this step. */
  private used = 0;
  private entries = 0;
  /** Per shard, the row entries staged this step (shards without any are not dispatched). */
  private shardRows: Int32Array;
  private wordEntries = 0;
  private readonly uploads: Upload[] = [];
  private readonly landing: GPUBuffer;
  /** Per shard its dispatch; made by `bind` (at decode's start and after each growth). */
  private dispatches: Dispatch[] = [];
  private uniforms: GPUBuffer[] = [];
  private half = new Uint16Array(0);
  /** Bytes an upload maps from now on. */
  private mapBytes: number;
  /** Bytes this step asked to stage (its index entries included), those refused for want of a mapped range too. */
  private asked = INDEX_HEADER_BYTES;

  constructor(
    private readonly ctx: GpuContext,
    /** Bytes of each upload and of the landing buffer, index table included. */
    readonly capacity: number,
    private readonly op: ScatterRows,
    into: WriteTargets,
  ) {
    if (capacity <= INDEX_BYTES)
      throw new RangeError(`step writes need more than ${INDEX_BYTES} bytes, got ${capacity}`);
    this.mapBytes = Math.min(capacity, FIRST_MAP);
    this.landing = ctx.buffer('kv.landing', capacity);
    this.shardRows = new Int32Array(into.k.length);
    this.bind(into);
    for (let i = 0; i < UPLOADS; i++) {
      const u = {
        buffer: ctx.buffer('kv.upload', capacity, GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC),
        ready: false,
        size: 0,
      };
      this.uploads.push(u);
      this.map(u);
    }
  }

  /** The scatter's dispatch per shard, over `into`: the pool's buffers, made anew when it grows. */
  bind(into: WriteTargets): void {
    for (const b of this.uniforms) this.ctx.destroy(b);
    this.uniforms = [];
    const u = sharedUniforms(this.ctx, (b) => this.uniforms.push(b));
    this.dispatches = into.k.map((k, s) =>
      this.op.run(
        { landing: this.landing, kPool: k, vPool: into.v[s], positions: into.positions, tables: into.tables },
        { shard: s, words: s === 0 },
        u,
      ),
    );
    if (this.shardRows.length !== into.k.length) this.shardRows = new Int32Array(into.k.length);
  }

  private map(u: Upload): void {
    u.size = this.mapBytes;
    u.buffer.mapAsync(GPUMapMode.WRITE, 0, u.size).then(
      () => (u.ready = true),
      // A destroyed buffer or a lost device: never ready, writes go up directly.
      () => {},
    );
  }

  /** The mapped bytes this step stages into, taking a mapped upload at its first write; null where none is mapped. */
  private target(): Uint8Array | null {
    if (this.data) return this.data;
    const i = this.uploads.findIndex((u) => u.ready);
    if (i < 0) return null;
    const u = this.uploads[i];
    u.ready = false;
    this.current = i;
    this.data = new Uint8Array(u.buffer.getMappedRange(0, u.size));
    return this.data;
  }

  /**
   * The mapped range where `bytes` more data and one more entry fit (in the upload, with the
   * index after the data, and in the landing buffer, after the index's region), counted as
   * asked for either way.
   */
  private room(bytes: number): Uint8Array | null {
    this.asked += bytes + ENTRY_BYTES;
    const data = this.target();
    const end = this.used + bytes;
    return data &&
      this.entries < MAX_ENTRIES &&
      end + indexBytes(this.entries + 1) <= data.length &&
      INDEX_BYTES + end <= this.capacity
      ? data
      : null;
  }

  private entry(dst: number, src: number, n: number, tag: number): void {
    const at = INDEX_HEADER_WORDS + ENTRY_WORDS * this.entries++;
    const ix = this.index;
    ix[at] = dst;
    ix[at + 1] = src;
    ix[at + 2] = n;
    ix[at + 3] = tag;
  }

  /** Word of the landing buffer where the next staged byte lands. */
  private get nextWord(): number {
    return (INDEX_BYTES + this.used) / 4;
  }

  /**
   * Stages `rows` rows of f32 keys and values ([rows, headDim] each) for slot `slot` of
   * `shard` (counted from the shard's first slot), in the pool's element format; false when
   * they do not fit.
   */
  addRows(
    shard: number,
    slot: number,
    rows: number,
    headDim: number,
    elementBytes: number,
    k: Float32Array,
    v: Float32Array,
  ): boolean {
    const n = rows * headDim;
    const bytes = n * elementBytes;
    if (bytes % 4 !== 0) return false;
    const data = this.room(2 * bytes);
    if (!data) return false;
    const put = (src: Float32Array, at: number) => {
      if (elementBytes === 4) data.set(new Uint8Array(src.buffer, src.byteOffset, bytes), at);
      else {
        if (this.half.length < n) this.half = new Uint16Array(n);
        data.set(new Uint8Array(packF16(src, n, this.half).buffer, 0, bytes), at);
      }
    };
    this.entry(slot, this.nextWord, rows, shard);
    put(k, this.used);
    put(v, this.used + bytes);
    this.used += 2 * bytes;
    this.shardRows[shard]++;
    return true;
  }

  /** Stages `rows` rows as the offload store keeps them (the pool's element format), copied as they are; false when they do not fit. */
  addRun(shard: number, slot: number, rows: number, run: StoredRun): boolean {
    const bytes = run.length;
    if (bytes % 4 !== 0) return false;
    const data = this.room(2 * bytes);
    if (!data) return false;
    this.entry(slot, this.nextWord, rows, shard);
    const at = this.used;
    if (run.v === run.k + bytes) data.set(run.bytes.subarray(run.k, run.k + 2 * bytes), at);
    else {
      data.set(run.bytes.subarray(run.k, run.k + bytes), at);
      data.set(run.bytes.subarray(run.v, run.v + bytes), at + bytes);
    }
    this.used += 2 * bytes;
    this.shardRows[shard]++;
    return true;
  }

  /** Stages `count` 4-byte words of `from` (from word `first` on) for `target` at word `at`; false when they do not fit. */
  addWords(target: WordTarget, at: number, from: Int32Array | Uint32Array, first: number, count: number): boolean {
    const bytes = count * 4;
    const data = this.room(bytes);
    if (!data) return false;
    this.entry(at, this.nextWord, count, SCATTER_WORDS | target);
    data.set(new Uint8Array(from.buffer, from.byteOffset + first * 4, bytes), this.used);
    this.used += bytes;
    this.wordEntries++;
    return true;
  }

  /** Bytes of rows and words staged this step (the index not counted). */
  get pending(): number {
    return this.used;
  }

  /**
   * The staged upload unmapped, copied into the landing buffer and scattered, recorded on
   * `enc` (before the step's own compute pass); null where nothing was staged.
   */
  encode(enc: GPUCommandEncoder): EncodedWrites | null {
    const refused = this.asked > this.used + indexBytes(this.entries);
    if (refused)
      this.mapBytes = Math.min(this.capacity, Math.max(this.mapBytes, Math.ceil((this.asked * 1.25) / 4) * 4));
    this.asked = INDEX_HEADER_BYTES;
    // A taken upload too small for this step is mapped again at the new size, used or not.
    if (this.entries === 0 && !(refused && this.data)) return null;
    const i = this.current;
    const buffer = this.uploads[i].buffer;
    const entries = this.entries;
    if (entries > 0) {
      this.index[0] = entries;
      const ib = indexBytes(entries);
      this.data!.set(new Uint8Array(this.index.buffer, 0, ib), this.used);
      buffer.unmap();
      enc.copyBufferToBuffer(buffer, this.used, this.landing, 0, ib);
      enc.copyBufferToBuffer(buffer, 0, this.landing, INDEX_BYTES, this.used);
      const [x, y] = grid(entries);
      const pass = enc.beginComputePass({ label: 'kv step writes' });
      for (let s = 0; s < this.dispatches.length; s++) {
        if (this.shardRows[s] === 0 && !(s === 0 && this.wordEntries > 0)) continue;
        const d = this.dispatches[s];
        d.x = x;
        d.y = y;
        record(pass, d);
      }
      pass.end();
    } else buffer.unmap();
    this.data = null;
    this.current = -1;
    this.entries = 0;
    this.wordEntries = 0;
    this.shardRows.fill(0);
    this.used = 0;
    return new EncodedWrites(() => this.map(this.uploads[i]));
  }

  destroy(): void {
    for (const u of this.uploads) this.ctx.destroy(u.buffer);
    for (const b of this.uniforms) this.ctx.destroy(b);
    this.ctx.destroy(this.landing);
  }
}
