/**
 * A decode step's KV writes (src/backend/webgpu/step-writes.ts), on a stand-in device whose
 * copies move bytes and whose scatter dispatches run the kernel's plain-TS reference
 * (src/reference/scatter-rows.ts) over what they bind: rows and words copied into a mapped
 * upload, no queue write, the upload copied into the landing buffer in two copies (index,
 * data) and scattered by one dispatch per shard with rows, f16 rows packed as the pool
 * stores them, the offload store's bits moved as they are, and what does not fit, or is
 * staged while no upload is mapped, refused (the pool then writes it directly).
 */
import { describe, expect, it } from 'vitest';
import { INDEX_BYTES, StepWrites } from '../../src/backend/webgpu/step-writes.js';
import { ScatterRows } from '../../src/backend/webgpu/ops.js';
import { packF16 } from '../../src/kv/precision.js';
import { SCATTER_POSITIONS, SCATTER_TABLES, scatterRows } from '../../src/reference/scatter-rows.js';
import type { GpuContext } from '../../src/gpu/device.js';

(globalThis as { GPUBufferUsage?: unknown }).GPUBufferUsage ??= {
  MAP_WRITE: 2,
  COPY_SRC: 4,
  COPY_DST: 8,
  UNIFORM: 64,
  STORAGE: 128,
};
(globalThis as { GPUMapMode?: unknown }).GPUMapMode ??= { READ: 1, WRITE: 2 };

interface FakeBuffer {
  label: string;
  mem: Uint8Array;
  values?: number[];
}

/** Buffers that hold bytes and map at once; a dispatch runs the reference over its bind group's buffers. */
function fakeDevice(headDim: number, elementBytes: number, bytes = 4096) {
  const uploads: { mapped: number }[] = [];
  const copies: { src: string; dst: string; size: number }[] = [];
  const dispatches: number[] = [];
  let queueWrites = 0;
  let maps = 0;
  const make = (label: string, size: number, extra: object = {}): FakeBuffer => ({
    label,
    mem: new Uint8Array(Math.ceil(size / 4) * 4),
    ...extra,
  });
  const ctx = {
    buffer: (label: string, size: number) => {
      const b = make(label, size);
      let mapped = 0;
      let range: ArrayBuffer | null = null;
      return Object.assign(b, {
        mapAsync: (_mode: number, _off = 0, n = size) => (maps++, Promise.resolve().then(() => void (mapped = n))),
        getMappedRange: (_off = 0, n = size) => {
          if (!mapped || n > mapped) throw new Error(`getMappedRange of ${n} bytes, ${mapped} mapped`);
          return (range = new ArrayBuffer(n));
        },
        unmap: () => {
          if (!mapped) throw new Error('unmap of an unmapped buffer');
          if (range) b.mem.set(new Uint8Array(range));
          uploads.push({ mapped });
          mapped = 0;
          range = null;
        },
      });
    },
    uniform: (label: string, values: ArrayLike<number>) => make(label, 16, { values: Array.from(values) }),
    bindGroup: (_p: unknown, entries: FakeBuffer[]) => entries,
    destroy: () => {},
    device: { queue: { writeBuffer: () => queueWrites++ } },
  } as unknown as GpuContext;
  const words = (b: FakeBuffer) => new Uint32Array(b.mem.buffer);
  const rowWords = (headDim * elementBytes) / 4;
  let bound: FakeBuffer[] = [];
  const enc = {
    copyBufferToBuffer: (s: FakeBuffer, so: number, d: FakeBuffer, d0: number, size: number) => {
      copies.push({ src: s.label, dst: d.label, size });
      d.mem.set(s.mem.subarray(so, so + size), d0);
    },
    beginComputePass: () => ({
      setPipeline: () => {},
      setBindGroup: (_i: number, g: FakeBuffer[]) => void (bound = g),
      dispatchWorkgroups: () => {
        const [landing, k, v, positions, tables, u] = bound;
        const [shard, w] = u.values!;
        dispatches.push(shard);
        // The dispatch binds its own shard's K and V only: the reference sees those at the shard's index.
        const only = (b: FakeBuffer) => Object.assign(new Array<Uint32Array>(shard + 1), { [shard]: words(b) });
        scatterRows(
          words(landing),
          rowWords,
          { k: only(k), v: only(v), positions: words(positions), tables: words(tables) },
          { shard, words: w === 1 },
        );
      },
      end: () => {},
    }),
  } as unknown as GPUCommandEncoder;
  const targets = {
    k: [make('k0', bytes), make('k1', bytes)],
    v: [make('v0', bytes), make('v1', bytes)],
    positions: make('positions', 256),
    tables: make('tables', 256),
  };
  return {
    ctx,
    enc,
    uploads,
    copies,
    dispatches,
    targets,
    words,
    into: targets as unknown as { k: GPUBuffer[]; v: GPUBuffer[]; positions: GPUBuffer; tables: GPUBuffer },
    queueWrites: () => queueWrites,
    maps: () => maps,
  };
}

type Device = ReturnType<typeof fakeDevice>;

/** Step writes whose uploads' first maps have resolved. */
async function mapped(d: Device, capacity = INDEX_BYTES + 4096): Promise<StepWrites> {
  const s = new StepWrites(d.ctx, capacity, new ScatterRows(d.ctx, {} as GPUComputePipeline), d.into);
  await new Promise((r) => setTimeout(r, 0));
  return s;
}

describe("a step's KV writes", () => {
  it('f32 rows of two shards and changed words go up in one upload and land where the pool keeps them, one dispatch per shard', async () => {
    const d = fakeDevice(4, 4);
    const s = await mapped(d);
    const k = Float32Array.from({ length: 8 }, (_, i) => i + 1);
    const v = Float32Array.from({ length: 8 }, (_, i) => -(i + 1));
    expect(s.addRows(0, 4, 2, 4, 4, k, v)).toBe(true);
    expect(s.addRows(1, 0, 1, 4, 4, k.subarray(4), v.subarray(4))).toBe(true);
    expect(s.addWords(SCATTER_POSITIONS, 3, Int32Array.from([7, 8, -1]), 0, 3)).toBe(true);
    expect(s.addWords(SCATTER_TABLES, 10, Uint32Array.from([0, 0, 42, 43]), 2, 2)).toBe(true);
    expect(s.pending).toBe(2 * 32 + 2 * 16 + 12 + 8);
    s.encode(d.enc)!.submitted();
    expect(d.uploads.length).toBe(1);
    expect(d.queueWrites()).toBe(0);
    // The index (header and four entries) after the data in the upload, before it in the landing buffer.
    expect(d.copies).toEqual([
      { src: 'kv.upload', dst: 'kv.landing', size: 16 + 4 * 16 },
      { src: 'kv.upload', dst: 'kv.landing', size: 2 * 32 + 2 * 16 + 12 + 8 },
    ]);
    expect(d.dispatches).toEqual([0, 1]);
    const f32 = (b: { mem: Uint8Array }) => new Float32Array(b.mem.buffer);
    expect(Array.from(f32(d.targets.k[0]).subarray(16, 24))).toEqual(Array.from(k));
    expect(Array.from(f32(d.targets.v[0]).subarray(16, 24))).toEqual(Array.from(v));
    expect(Array.from(f32(d.targets.k[1]).subarray(0, 4))).toEqual([5, 6, 7, 8]);
    expect(Array.from(f32(d.targets.v[1]).subarray(0, 4))).toEqual([-5, -6, -7, -8]);
    expect(Array.from(new Int32Array(d.targets.positions.mem.buffer, 12, 3))).toEqual([7, 8, -1]);
    expect(Array.from(d.words(d.targets.tables).subarray(10, 12))).toEqual([42, 43]);
    // Nothing staged: no upload, no copy, no dispatch.
    expect(s.encode(d.enc)).toBeNull();
    expect(d.copies.length).toBe(2);
    expect(d.dispatches.length).toBe(2);
  });

  it('takes the uploads in turn, maps one again only once its submit is made, and refuses writes while none is mapped', async () => {
    const d = fakeDevice(4, 4);
    const s = new StepWrites(d.ctx, INDEX_BYTES + 64, new ScatterRows(d.ctx, {} as GPUComputePipeline), d.into);
    const row = Float32Array.from([1, 2, 3, 4]);
    // The first maps have not resolved: the pool writes these rows directly.
    expect(s.addRows(0, 0, 1, 4, 4, row, row)).toBe(false);
    await new Promise((r) => setTimeout(r, 0));
    expect(d.maps()).toBe(2);
    const encoded = [0, 1].map((step) => {
      expect(s.addRows(0, step, 1, 4, 4, row, row)).toBe(true);
      return s.encode(d.enc)!;
    });
    // Both uploads are out and neither submit is said to be made: nothing to stage into.
    expect(s.addRows(0, 0, 1, 4, 4, row, row)).toBe(false);
    encoded[0].submitted();
    encoded[0].submitted();
    expect(d.maps()).toBe(3);
    await new Promise((r) => setTimeout(r, 0));
    expect(s.addRows(0, 0, 1, 4, 4, row, row)).toBe(true);
    s.encode(d.enc);
    expect(d.uploads.length).toBe(3);
    expect(d.queueWrites()).toBe(0);
  });

  it('maps no more than the steps have asked for: a step past the mapped range has the next maps larger', async () => {
    const MiB = 2 ** 20;
    const d = fakeDevice(4, 4, 2 * MiB);
    const s = await mapped(d, INDEX_BYTES + 8 * MiB);
    // 1.5 MiB of K and V: past the first 1 MiB mapped, so written directly.
    const big = new Float32Array((0.75 * MiB) / 4);
    expect(s.addRows(0, 0, big.length / 4, 4, 4, big, big)).toBe(false);
    const row = Float32Array.from([1, 2, 3, 4]);
    expect(s.addRows(0, 0, 1, 4, 4, row, row)).toBe(true);
    s.encode(d.enc)!.submitted();
    expect(d.uploads.map((w) => w.mapped)).toEqual([MiB]);
    // Mapped again at what the step asked for (1.5 MiB and a row, with their two index entries
    // and the index's header) and a quarter more.
    await new Promise((r) => setTimeout(r, 0));
    expect(s.addRows(0, 0, big.length / 4, 4, 4, big, big)).toBe(true);
    s.encode(d.enc);
    expect(d.uploads.map((w) => w.mapped)).toEqual([MiB, Math.ceil(((1.5 * MiB + 32 + 3 * 16) * 1.25) / 4) * 4]);
    expect(d.queueWrites()).toBe(0);
  });

  it('f16: rows are packed as the pool holds them; what does not fit is refused', async () => {
    const d = fakeDevice(4, 2);
    const s = await mapped(d, INDEX_BYTES + 40);
    const k = Float32Array.from([0.5, -1.25, 3, 1e-3]);
    const v = Float32Array.from([2, 4, 8, 16]);
    expect(s.addRows(0, 1, 1, 4, 2, k, v)).toBe(true);
    expect(s.addRows(0, 2, 2, 4, 2, new Float32Array(8), new Float32Array(8))).toBe(false); // 16 + 32 > 40
    s.encode(d.enc);
    expect(Array.from(new Uint16Array(d.targets.k[0].mem.buffer, 8, 4))).toEqual(Array.from(packF16(k, 4)));
    expect(Array.from(new Uint16Array(d.targets.v[0].mem.buffer, 8, 4))).toEqual(Array.from(packF16(v, 4)));
    expect(d.dispatches).toEqual([0]);
  });

  it("a run of the offload store's f16 bits lands as it is, the same bytes the packed rows give", async () => {
    const k = Float32Array.from([0.5, -1.25, 3, 1e-3]);
    const v = Float32Array.from([2, 4, 8, 16]);
    const packed = fakeDevice(4, 2);
    const a = await mapped(packed, INDEX_BYTES + 64);
    expect(a.addRows(1, 2, 1, 4, 2, k, v)).toBe(true);
    a.encode(packed.enc);
    const bits = fakeDevice(4, 2);
    const b = await mapped(bits, INDEX_BYTES + 64);
    // A chunk's bytes with the keys and the values at offsets inside it, as the store's run gives them.
    const chunk = new Uint16Array(24);
    chunk.set(packF16(k, 4), 4);
    chunk.set(packF16(v, 4), 16);
    const bytes = new Uint8Array(chunk.buffer);
    expect(b.addRun(1, 2, 1, { bytes, k: 8, v: 32, length: 8 })).toBe(true);
    expect(b.addRun(0, 0, 20, { bytes: new Uint8Array(160), k: 0, v: 80, length: 80 })).toBe(false); // 16 + 160 > 64
    b.encode(bits.enc);
    expect(bits.targets.k[1].mem).toEqual(packed.targets.k[1].mem);
    expect(bits.targets.v[1].mem).toEqual(packed.targets.v[1].mem);
    expect(Array.from(new Uint16Array(bits.targets.k[1].mem.buffer, 16, 4))).toEqual(Array.from(packF16(k, 4)));
    expect(bits.dispatches).toEqual([1]);
  });
});
