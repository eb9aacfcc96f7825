/**
 * Decode-time pool rows staged for the step's encoder (src/backend/webgpu/row-staging.ts),
 * on a recording stand-in for the device: rows copied into a mapped upload, no queue write,
 * one copy per run into K and V at the run's offset, f16 rows packed as the pool stores
 * them, and rows past the capacity, or staged while no upload is mapped, refused (the pool
 * then writes them directly).
 */
import { describe, expect, it } from 'vitest';
import { RowStaging } from '../../src/backend/webgpu/row-staging.js';
import { packF16 } from '../../src/kv/precision.js';
import type { GpuContext } from '../../src/gpu/device.js';

(globalThis as { GPUBufferUsage?: unknown }).GPUBufferUsage ??= { MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8 };
(globalThis as { GPUMapMode?: unknown }).GPUMapMode ??= { READ: 1, WRITE: 2 };

/** Buffers that map at once; `writes` holds what each upload held when it was unmapped, `queueWrites` the queue's writes. */
function fakeDevice() {
  const writes: { bytes: Uint8Array; mapped: number }[] = [];
  const copies: { src: string; srcOffset: number; dst: string; dstOffset: number; size: number }[] = [];
  let queueWrites = 0;
  let maps = 0;
  const ctx = {
    buffer: (label: string, size: number) => {
      const mem = new Uint8Array(size);
      let mapped = 0;
      let range: ArrayBuffer | null = null;
      return {
        label,
        mapAsync: (_mode: number, _off = 0, n = size) => (maps++, Promise.resolve().then(() => void (mapped = n))),
        getMappedRange: (_off = 0, n = size) => {
          if (!mapped || n > mapped) throw new Error(`getMappedRange of ${n} bytes, ${mapped} mapped`);
          return (range = new ArrayBuffer(n));
        },
        unmap: () => {
          if (!mapped) throw new Error('unmap of an unmapped buffer');
          if (range) mem.set(new Uint8Array(range));
          writes.push({ bytes: mem.slice(), mapped });
          mapped = 0;
          range = null;
        },
      };
    },
    destroy: () => {},
    device: { queue: { writeBuffer: () => queueWrites++ } },
  } as unknown as GpuContext;
  const enc = {
    copyBufferToBuffer: (s: { label: string }, so: number, d: { label: string }, d0: number, size: number) =>
      copies.push({ src: s.label, srcOffset: so, dst: d.label, dstOffset: d0, size }),
  } as unknown as GPUCommandEncoder;
  const buf = (label: string) => ({ label }) as unknown as GPUBuffer;
  return {
    ctx,
    enc,
    writes,
    copies,
    queueWrites: () => queueWrites,
    maps: () => maps,
    k: [buf('k0'), buf('k1')],
    v: [buf('v0'), buf('v1')],
  };
}

/** A staging whose uploads' first maps have resolved. */
async function mapped(ctx: GpuContext, capacity: number): Promise<RowStaging> {
  const s = new RowStaging(ctx, capacity);
  await new Promise((r) => setTimeout(r, 0));
  return s;
}

describe('staged pool rows', () => {
  it('f32: runs of two shards go up in one mapped upload and are copied to their offsets in K and V', async () => {
    const d = fakeDevice();
    const s = await mapped(d.ctx, 1024);
    const k1 = Float32Array.from({ length: 8 }, (_, i) => i + 1);
    const v1 = Float32Array.from({ length: 8 }, (_, i) => -(i + 1));
    expect(s.add(0, 64, 8, 4, k1, v1)).toBe(true);
    expect(s.add(1, 0, 4, 4, k1.subarray(4), v1.subarray(4))).toBe(true);
    expect(s.pending).toBe(2 * 32 + 2 * 16);
    s.encode(d.enc, d.k, d.v);
    expect(d.writes.length).toBe(1);
    expect(d.queueWrites()).toBe(0);
    const up = new Float32Array(d.writes[0].bytes.buffer, 0, 24);
    expect(Array.from(up)).toEqual([...k1, ...v1, 5, 6, 7, 8, -5, -6, -7, -8]);
    expect(d.copies).toEqual([
      { src: 'kv.staging', srcOffset: 0, dst: 'k0', dstOffset: 64, size: 32 },
      { src: 'kv.staging', srcOffset: 32, dst: 'v0', dstOffset: 64, size: 32 },
      { src: 'kv.staging', srcOffset: 64, dst: 'k1', dstOffset: 0, size: 16 },
      { src: 'kv.staging', srcOffset: 80, dst: 'v1', dstOffset: 0, size: 16 },
    ]);
    // Nothing staged: no write, no copy.
    s.encode(d.enc, d.k, d.v);
    expect(d.writes.length).toBe(1);
    expect(d.copies.length).toBe(4);
  });

  it('takes the uploads in turn, maps one again only once its submit is made, and refuses rows while none is mapped', async () => {
    const d = fakeDevice();
    const s = new RowStaging(d.ctx, 64);
    const row = Float32Array.from([1, 2, 3, 4]);
    // The first maps have not resolved: the pool writes these rows directly.
    expect(s.add(0, 0, 4, 4, row, row)).toBe(false);
    await new Promise((r) => setTimeout(r, 0));
    expect(d.maps()).toBe(2);
    for (const step of [0, 1]) {
      expect(s.add(0, 16 * step, 4, 4, row, row)).toBe(true);
      s.encode(d.enc, d.k, d.v);
    }
    // Both uploads are out and neither submit is said to be made: nothing to stage into.
    expect(s.add(0, 0, 4, 4, row, row)).toBe(false);
    expect(d.copies.map((c) => c.src)).toEqual(['kv.staging', 'kv.staging', 'kv.staging', 'kv.staging']);
    s.submitted();
    expect(d.maps()).toBe(3);
    await new Promise((r) => setTimeout(r, 0));
    expect(s.add(0, 0, 4, 4, row, row)).toBe(true);
    s.encode(d.enc, d.k, d.v);
    expect(d.writes.length).toBe(3);
    expect(d.queueWrites()).toBe(0);
  });

  it('maps no more than the steps have asked for: a step past the mapped range has the next maps larger', async () => {
    const d = fakeDevice();
    const MiB = 2 ** 20;
    const s = await mapped(d.ctx, 8 * MiB);
    // 1.5 MiB of K and V: past the first 1 MiB mapped, so written directly.
    const big = new Float32Array((0.75 * MiB) / 4);
    expect(s.add(0, 0, big.length, 4, big, big)).toBe(false);
    const row = Float32Array.from([1, 2, 3, 4]);
    expect(s.add(0, 0, 4, 4, row, row)).toBe(true);
    s.encode(d.enc, d.k, d.v);
    s.submitted();
    expect(d.writes.map((w) => w.mapped)).toEqual([MiB]);
    // Mapped again at what the step asked for (1.5 MiB and a row) and a quarter more.
    await new Promise((r) => setTimeout(r, 0));
    expect(s.add(0, 0, big.length, 4, big, big)).toBe(true);
    s.encode(d.enc, d.k, d.v);
    expect(d.writes.map((w) => w.mapped)).toEqual([MiB, Math.ceil(((1.5 * MiB + 32) * 1.25) / 4) * 4]);
    expect(d.queueWrites()).toBe(0);
  });

  it('f16: rows are packed as the pool holds them; what does not fit is refused', async () => {
    const d = fakeDevice();
    const s = await mapped(d.ctx, 40);
    const k = Float32Array.from([0.5, -1.25, 3, 1e-3]);
    const v = Float32Array.from([2, 4, 8, 16]);
    expect(s.add(0, 8, 4, 2, k, v)).toBe(true);
    expect(s.add(0, 16, 8, 2, new Float32Array(8), new Float32Array(8))).toBe(false); // 16 + 32 > 40
    s.encode(d.enc, d.k, d.v);
    expect(Array.from(new Uint16Array(d.writes[0].bytes.buffer, 0, 8))).toEqual([...packF16(k, 4), ...packF16(v, 4)]);
    expect(d.copies.map((c) => [c.dst, c.dstOffset, c.size])).toEqual([
      ['k0', 8, 8],
      ['v0', 8, 8],
    ]);
  });

  it("a run of the offload store's f16 bits goes up as it is, the same bytes the packed rows give", async () => {
    const k = Float32Array.from([0.5, -1.25, 3, 1e-3]);
    const v = Float32Array.from([2, 4, 8, 16]);
    const packed = fakeDevice();
    const a = await mapped(packed.ctx, 64);
    expect(a.add(1, 8, 4, 2, k, v)).toBe(true);
    a.encode(packed.enc, packed.k, packed.v);
    const bits = fakeDevice();
    const b = await mapped(bits.ctx, 64);
    // A chunk's bytes with the keys and the values at offsets inside it, as the store's run gives them.
    const chunk = new Uint16Array(24);
    chunk.set(packF16(k, 4), 4);
    chunk.set(packF16(v, 4), 16);
    const bytes = new Uint8Array(chunk.buffer);
    expect(b.addRun(1, 8, { bytes, k: 8, v: 32, length: 8 })).toBe(true);
    expect(b.addRun(0, 0, { bytes: new Uint8Array(160), k: 0, v: 80, length: 80 })).toBe(false); // 16 + 160 > 64
    b.encode(bits.enc, bits.k, bits.v);
    expect(bits.writes).toEqual(packed.writes);
    expect(bits.copies).toEqual(packed.copies);
  });
});
