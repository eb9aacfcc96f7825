/**
 * The KV pool's bytes on the GPU, in the shape of a PoolLayout (pool-layout.ts): K and V
 * pages [pages, pageSize, headDim] per shard, the positions buffer (mirror of
 * Residency.positions; EMPTY = -1 marks a free slot), the page tables of every (layer,
 * KV head), and the decode attention's per-slot scores and split-K partials, which are
 * sized by the pool. All placement decisions are the shared Residency's; this class only
 * moves bytes, batching position and table uploads so a decode step writes each at most
 * once. Slots are pool-wide; a kernel that touches one layer binds that layer's shard
 * and subtracts its first slot (`baseSlot`).
 */
import { StepWrites, type EncodedWrites } from './step-writes.js';
import type { ScatterRows } from './ops.js';
import { SCATTER_POSITIONS, SCATTER_TABLES } from '../../reference/scatter-rows.js';
import { PageTables, tableEntries } from './page-tables.js';
import type { ModelConfig } from '../../model/config.js';
import { groupSize, kvHeadCount } from '../../model/config.js';
import type { PageStorage } from '../../kv/residency.js';
import type { PageAllocator, PoolShard } from '../../kv/page-allocator.js';
import type { GpuContext } from '../../gpu/device.js';
import { shardedLayout, type PoolLayout } from './pool-layout.js';
import { packF16 } from '../../kv/precision.js';
import type { StoredRun } from '../../kv/offload.js';
import { ContextTooLongError, OutOfMemoryError } from '../../errors.js';

export const NO_EXPORT = 0xffffffff;

/** Changed position spans at most this many slots apart are written as one. */
const POSITION_GAP = 8;

/**
 * The page-table buffer: meta[4h..4h+3] = (offset of head h's page list in this array,
 * page count, export index or NO_EXPORT, 0), then the lists back to back.
 */
export function buildTables(
  res: { pageTable(h: number): readonly number[] },
  heads: number,
  exportIndex: ArrayLike<number>,
  out?: Uint32Array,
): Uint32Array {
  let total = heads * 4;
  for (let h = 0; h < heads; h++) total += res.pageTable(h).length;
  const t = out && out.length >= total ? out : new Uint32Array(total);
  let off = heads * 4;
  for (let h = 0; h < heads; h++) {
    const pages = res.pageTable(h);
    t[h * 4] = off;
    t[h * 4 + 1] = pages.length;
    t[h * 4 + 2] = exportIndex[h];
    t[h * 4 + 3] = 0;
    for (let i = 0; i < pages.length; i++) t[off + i] = pages[i];
    off += pages.length;
  }
  return t;
}

export class GpuPool implements PageStorage {
  /** Per shard. */
  readonly k: GPUBuffer[] = [];
  readonly v: GPUBuffer[] = [];
  positions!: GPUBuffer;
  tables!: GPUBuffer;
  /** Raw decode scores per slot and query of the group (exported heads read them back). */
  scores!: GPUBuffer;
  partials!: GPUBuffer;
  /** Bumped when the pool grows: whatever binds its buffers (the decode step) is rebuilt. */
  generation = 0;
  /** The last growth's allocations: resolves to an OutOfMemoryError, or null (WebGPU reports it only asynchronously). */
  growthFailure: Promise<Error | null> = Promise.resolve(null);
  /** Queue submits of the growths so far (one per grown shard): the decode step's counters report them. */
  submits = 0;
  /**
   * Pages holding slots whose positions changed since the last flush, each listed once, and
   * per page the changed slots' span [dirtyLo, dirtyHi) within it (dirtyLo −1: unchanged):
   * a step's releases and recalls touch thousands of slots in a few hundred pages, so
   * marking a slot costs the same however many changed.
   */
  private dirtyPages = new Int32Array(64);
  private dirtyCount = 0;
  private dirtyLo = new Int32Array(0);
  private dirtyHi = new Int32Array(0);
  private mirror: Int32Array | null = null;
  private pageTables!: PageTables;
  /** Bytes written outside a flush (a growth's new slots), counted with the next flush. */
  private unflushed = 0;
  /** Bytes written into pages by writeRows since the last take(). */
  bytesWritten = 0;
  readonly pageSize: number;
  readonly heads: number;
  readonly headDim: number;
  private readonly shardOfLayer: Int32Array;
  private shardOfPage!: Int32Array;
  private half = new Uint16Array(0);
  /** A decode step's writes, encoded by the step (step-writes.ts); null while placing the prefill. */
  private writes: StepWrites | null = null;

  /** Bytes one binding holds, which growth keeps to. */
  private readonly limit: number;

  /**
   * `made.shardBuffers`: the shards' K/V buffers when made already (a per-layer prefill
   * filled them); the pool owns them from here. `made.limit`: bytes one binding holds
   * (default unbounded).
   */
  constructor(
    private readonly ctx: GpuContext,
    private readonly c: ModelConfig,
    public layout: PoolLayout,
    private readonly exportIndex: Uint32Array,
    made: { shardBuffers?: { k: GPUBuffer; v: GPUBuffer }[]; limit?: number } = {},
  ) {
    const { shardBuffers, limit = Infinity } = made;
    this.limit = limit;
    const { pageSize, shards } = layout;
    this.pageSize = pageSize;
    this.heads = kvHeadCount(c);
    this.headDim = c.headDim;
    this.shardOfLayer = new Int32Array(c.numLayers);
    shards.forEach((sh, i) => {
      this.shardOfLayer.fill(i, sh.firstLayer, sh.firstLayer + sh.layers);
      if (shardBuffers) {
        this.k.push(shardBuffers[i].k);
        this.v.push(shardBuffers[i].v);
        return;
      }
      this.k.push(ctx.buffer(this.kvLabel('k', i), this.shardBytes(sh.pages)));
      this.v.push(ctx.buffer(this.kvLabel('v', i), this.shardBytes(sh.pages)));
    });
    this.makeSlotBuffers();
    const slots = layout.capacityPages * pageSize;
    ctx.device.queue.writeBuffer(this.positions, 0, new Int32Array(slots).fill(-1));
  }

  private kvLabel(kv: 'k' | 'v', shard: number): string {
    return `kv.${kv}${this.layout.shards.length > 1 ? `.${shard}` : ''}`;
  }

  private shardBytes(pages: number): number {
    return Math.max(1, pages) * this.pageSize * this.headDim * this.layout.elementBytes;
  }

  /** The buffers sized by the pool's slots and pages: positions, tables, decode scores, split-K partials. */
  private makeSlotBuffers(): void {
    const { capacityPages, pageSize, shards, maxSplits } = this.layout;
    const c = this.c;
    const slots = capacityPages * pageSize;
    this.shardOfPage = new Int32Array(capacityPages);
    shards.forEach((sh, i) => this.shardOfPage.fill(i, sh.firstPage, sh.firstPage + sh.pages));
    this.positions = this.ctx.buffer('kv.positions', slots * 4);
    const entries = tableEntries(this.heads, capacityPages);
    this.tables = this.ctx.buffer('kv.tables', entries * 4);
    this.scores = this.ctx.buffer('attn.scores', slots * groupSize(c) * 4);
    this.partials = this.ctx.buffer('attn.partials', maxSplits * c.numHeads * (c.headDim + 2) * 4);
    if (this.pageTables) this.pageTables.resize(entries);
    else this.pageTables = new PageTables(this.heads, entries, this.exportIndex);
  }

  /**
   * The Residency grew the pool: each grown shard's K/V move into larger buffers (copied
   * whole, one shard at a time, so at most one shard's old pair is alive beside the new
   * pool), and the slot-sized buffers are remade; positions come with the next flush.
   */
  grow(_from: readonly PoolShard[], to: readonly PoolShard[]): boolean {
    const HKV = this.c.numKvHeads;
    const old = this.layout;
    const shards = to.map((s) => ({
      firstLayer: s.firstHead / HKV,
      layers: s.heads / HKV,
      firstPage: s.firstPage,
      pages: s.pages,
    }));
    for (const [i, sh] of shards.entries()) {
      const bytes = this.shardBytes(sh.pages);
      if (bytes > this.limit)
        throw new ContextTooLongError(
          bytes,
          this.limit,
          `the KV pool's shard ${i} grows to ${sh.pages} pages for the text, whose keys exceed this device's binding limit`,
          'pool-binding',
        );
    }
    this.layout = shardedLayout(this.c, shards, this.pageSize, this.limit, old.elementBytes);
    const device = this.ctx.device;
    // Staged writes go into the old buffers first, then move with them.
    if (this.writes?.pending) {
      const enc = device.createCommandEncoder({ label: 'kv staged writes' });
      const encoded = this.writes.encode(enc);
      device.queue.submit([enc.finish()]);
      encoded?.submitted();
      this.submits++;
    }
    // Positions not yet uploaded go into the old buffer, which moves with the pages below.
    this.writeDirty(false);
    const kept = { positions: this.positions, tables: this.tables };
    device.pushErrorScope('out-of-memory');
    try {
      for (const b of [this.scores, this.partials]) this.ctx.destroy(b);
      shards.forEach((sh, i) => {
        const was = old.shards[i].pages;
        if (sh.pages === was) return;
        const enc = this.ctx.device.createCommandEncoder({ label: 'kv pool growth' });
        const from = [this.k[i], this.v[i]];
        const into = (['k', 'v'] as const).map((kv) => this.ctx.buffer(this.kvLabel(kv, i), this.shardBytes(sh.pages)));
        from.forEach((f, j) => enc.copyBufferToBuffer(f, 0, into[j], 0, this.shardBytes(was)));
        this.ctx.device.queue.submit([enc.finish()]);
        this.submits++;
        // WebGPU frees a destroyed buffer only once the queued copy has read it.
        for (const f of from) this.ctx.destroy(f);
        [this.k[i], this.v[i]] = into;
      });
      this.makeSlotBuffers();
      this.moveSlots(old, kept);
      this.writes?.bind(this);
    } finally {
      const bytes = this.layout.bytes;
      this.growthFailure = device
        .popErrorScope()
        .then((e) =>
          e ? new OutOfMemoryError(`the KV pool grown for the text (${this.layout.capacityPages} pages)`, bytes) : null,
        );
    }
    this.generation++;
    return true;
  }

  /**
   * The grown pool's positions and tables, copied on the GPU from the old buffers (each
   * shard's slots to its new first page, the new pages' slots EMPTY), so a growth uploads
   * what it adds, not every slot of the pool; the tables' entries that moved follow with the
   * next flush.
   */
  private moveSlots(old: PoolLayout, from: { positions: GPUBuffer; tables: GPUBuffer }): void {
    const P = this.pageSize;
    const enc = this.ctx.device.createCommandEncoder({ label: 'kv slots growth' });
    enc.copyBufferToBuffer(from.tables, 0, this.tables, 0, from.tables.size);
    old.shards.forEach((was, i) =>
      enc.copyBufferToBuffer(
        from.positions,
        was.firstPage * P * 4,
        this.positions,
        this.layout.shards[i].firstPage * P * 4,
        was.pages * P * 4,
      ),
    );
    this.ctx.device.queue.submit([enc.finish()]);
    this.submits++;
    this.ctx.destroy(from.positions);
    this.ctx.destroy(from.tables);
    old.shards.forEach((was, i) => {
      const now = this.layout.shards[i];
      const added = (now.pages - was.pages) * P;
      if (added <= 0) return;
      this.ctx.device.queue.writeBuffer(
        this.positions,
        (now.firstPage + was.pages) * P * 4,
        new Int32Array(added).fill(-1),
      );
      this.unflushed += added * 4;
    });
  }

  /** The K and V buffers that hold `layer`'s pages. */
  kOf(layer: number): GPUBuffer {
    return this.k[this.shardOfLayer[layer]];
  }

  vOf(layer: number): GPUBuffer {
    return this.v[this.shardOfLayer[layer]];
  }

  /** Pool-wide slot of the first slot of `layer`'s shard: kernels index K/V with slot - baseSlot. */
  baseSlot(layer: number): number {
    return this.layout.shards[this.shardOfLayer[layer]].firstPage * this.pageSize;
  }

  /**
   * Decoding starts: from now on rows, positions and table entries written into the pool
   * are staged for the next step's encoder (step-writes.ts), `capacity` bytes at most a
   * step, the rest written directly.
   */
  startDecode(scatter: ScatterRows, capacity: number): void {
    if (this.writes) throw new Error('the KV pool has started decoding already');
    this.writes = new StepWrites(this.ctx, capacity, scatter, this);
  }

  /** Records the step's staged writes on its encoder (before its compute pass); null where there were none. */
  encodeWrites(enc: GPUCommandEncoder): EncodedWrites | null {
    return this.writes?.encode(enc) ?? null;
  }

  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    // A run of rows lies within one page, hence within one shard.
    const s = this.shardOfPage[Math.floor(slot / this.pageSize)];
    const first = this.layout.shards[s].firstPage * this.pageSize;
    const n = count * this.headDim;
    const eb = this.layout.elementBytes;
    if (this.writes?.addRows(s, slot - first, count, this.headDim, eb, k, v)) {
      this.bytesWritten += 2 * eb * n;
      return;
    }
    this.half = writeKvRows(
      this.ctx.device.queue,
      { k: this.k[s], v: this.v[s] },
      slot - first,
      count * this.headDim,
      this.headDim,
      this.layout.elementBytes,
      k,
      v,
      this.half,
    );
    this.bytesWritten += 2 * this.layout.elementBytes * count * this.headDim;
  }

  writeStoredRows(slot: number, count: number, run: StoredRun): void {
    const s = this.shardOfPage[Math.floor(slot / this.pageSize)];
    const inShard = slot - this.layout.shards[s].firstPage * this.pageSize;
    this.bytesWritten += 2 * run.length;
    if (this.writes?.addRun(s, inShard, count, run)) return;
    const at = inShard * this.headDim * this.layout.elementBytes;
    const { bytes } = run;
    this.ctx.device.queue.writeBuffer(this.k[s], at, bytes.buffer, bytes.byteOffset + run.k, run.length);
    this.ctx.device.queue.writeBuffer(this.v[s], at, bytes.buffer, bytes.byteOffset + run.v, run.length);
  }

  syncPositions(firstSlot: number, count: number, positions: Int32Array): void {
    this.mirror = positions;
    if (count <= 0) return;
    const P = this.pageSize;
    const end = firstSlot + count;
    const last = Math.floor((end - 1) / P);
    if (last >= this.dirtyLo.length) {
      const n = Math.max(last + 1, 2 * this.dirtyLo.length);
      const lo = new Int32Array(n).fill(-1);
      lo.set(this.dirtyLo);
      const hi = new Int32Array(n);
      hi.set(this.dirtyHi);
      [this.dirtyLo, this.dirtyHi] = [lo, hi];
    }
    for (let p = Math.floor(firstSlot / P); p <= last; p++) {
      const a = Math.max(firstSlot - p * P, 0);
      const b = Math.min(end - p * P, P);
      if (this.dirtyLo[p] < 0) {
        if (this.dirtyCount === this.dirtyPages.length) {
          const more = new Int32Array(2 * this.dirtyCount);
          more.set(this.dirtyPages);
          this.dirtyPages = more;
        }
        this.dirtyPages[this.dirtyCount++] = p;
        this.dirtyLo[p] = a;
        this.dirtyHi[p] = b;
      } else {
        this.dirtyLo[p] = Math.min(this.dirtyLo[p], a);
        this.dirtyHi[p] = Math.max(this.dirtyHi[p], b);
      }
    }
  }

  /**
   * Uploads changed positions and, where the allocator's page tables changed, their changed
   * entries. Before each submit. Returns the bytes written.
   */
  flush(pages: PageAllocator): number {
    const q = this.ctx.device.queue;
    let bytes = this.writeDirty(true) + this.unflushed;
    this.unflushed = 0;
    const t = this.pageTables;
    if (t.pending || pages.changedCount) {
      const n = t.update(pages);
      pages.clearChanges();
      const data = t.data;
      for (let r = 0; r < n; r++) {
        const a = t.runs[2 * r];
        const b = t.runs[2 * r + 1];
        if (!this.writes?.addWords(SCATTER_TABLES, a, data, a, b - a))
          q.writeBuffer(this.tables, a * 4, data.buffer, data.byteOffset + a * 4, (b - a) * 4);
        bytes += (b - a) * 4;
      }
    }
    return bytes;
  }

  /**
   * Uploads the changed positions, staged for the next step's encoder where `staged` and
   * the pool stages (decode), else written now; returns the bytes.
   */
  private writeDirty(staged: boolean): number {
    const q = this.ctx.device.queue;
    let bytes = 0;
    const m = this.mirror;
    const pages = this.dirtyPages.subarray(0, this.dirtyCount).sort();
    if (m && pages.length) {
      const P = this.pageSize;
      const write = (a: number, b: number) => {
        if (!staged || !this.writes?.addWords(SCATTER_POSITIONS, a, m, a, b - a))
          q.writeBuffer(this.positions, a * 4, m.buffer, m.byteOffset + a * 4, (b - a) * 4);
        bytes += (b - a) * 4;
      };
      // Spans a few slots apart go up as one: fewer writes, few wasted bytes (each head's new
      // text slot lies in its own page, a page or more from the next head's: those stay apart).
      let lo = -1;
      let hi = -1;
      for (let i = 0; i < pages.length; i++) {
        const p = pages[i];
        const a = p * P + this.dirtyLo[p];
        const b = Math.min(m.length, p * P + this.dirtyHi[p]);
        if (lo >= 0 && a <= hi + POSITION_GAP) hi = Math.max(hi, b);
        else {
          if (lo >= 0) write(lo, hi);
          lo = a;
          hi = b;
        }
      }
      write(lo, hi);
    }
    for (let i = 0; i < pages.length; i++) this.dirtyLo[pages[i]] = -1;
    this.dirtyCount = 0;
    return bytes;
  }

  destroy(): void {
    for (const b of [...this.k, ...this.v, this.positions, this.tables, this.scores, this.partials])
      this.ctx.destroy(b);
    this.writes?.destroy();
  }
}

/**
 * Writes `n` key and value elements (f32) into a shard's K/V buffers from `slot` (shard
 * relative) on, in the pool's precision; returns the f16 scratch (grown if it had to be).
 */
export function writeKvRows(
  q: GPUQueue,
  shard: { k: GPUBuffer; v: GPUBuffer },
  slot: number,
  n: number,
  headDim: number,
  elementBytes: number,
  k: Float32Array,
  v: Float32Array,
  half: Uint16Array<ArrayBuffer>,
): Uint16Array<ArrayBuffer> {
  const at = slot * headDim * elementBytes;
  if (elementBytes === 2) {
    // writeBuffer copies the data before returning: one scratch serves both rows.
    if (half.length < n) half = new Uint16Array(n);
    q.writeBuffer(shard.k, at, packF16(k, n, half).buffer, 0, n * 2);
    q.writeBuffer(shard.v, at, packF16(v, n, half).buffer, 0, n * 2);
  } else {
    q.writeBuffer(shard.k, at, k.buffer, k.byteOffset, n * 4);
    q.writeBuffer(shard.v, at, v.buffer, v.byteOffset, n * 4);
  }
  return half;
}
