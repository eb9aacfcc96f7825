/**
 * A converted folder's decoder as a source of byte ranges (src/model/packed-source.ts):
 * located from shard headers alone, read whole it equals the folder loaded packed; loaded
 * with `stream` it holds no weights; the WebGPU upload streams it into buffers whose bytes
 * equal those of uploading the packed weights from memory, pieces straddling tensors and
 * the row parts of a split embedding; the CPU backend reads it whole.
 */
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { convertFolder } from '../../src/cli/convert.js';
import { CancelledError, ModelLoadError } from '../../src/errors.js';
import { loadModel } from '../../src/model/loader.js';
import { isPackedSource, readPackedSource, sourceWeightBytes } from '../../src/model/packed-source.js';
import { packedWeightBytes, type PackedDecoderWeights } from '../../src/model/packed-weights.js';
import { createBackend } from '../../src/backend/create.js';
import { GpuWeights } from '../../src/backend/webgpu/weights.js';
import type { GpuContext } from '../../src/gpu/device.js';
import type { WeightKernelsOf } from '../../src/backend/webgpu/weight-kernels.js';
import type { GpuMatrix } from '../../src/backend/webgpu/weight-formats.js';
import { ensureMiniatures } from '../helpers/miniatures.js';

let converted: string;
const tmp = mkdtempSync(join(tmpdir(), 'wnw-packed-source-'));

beforeAll(async () => {
  // Node has no WebGPU globals; the fake device below needs only the usage flags' names.
  if (typeof GPUBufferUsage === 'undefined')
    vi.stubGlobal('GPUBufferUsage', {
      MAP_READ: 1,
      MAP_WRITE: 2,
      COPY_SRC: 4,
      COPY_DST: 8,
      UNIFORM: 0x40,
      STORAGE: 0x80,
    });
  const mini = await ensureMiniatures();
  converted = join(tmp, 'voxtral-q4');
  // Small shards, so the decoder's tensors are spread over several files.
  await convertFolder({ from: join(mini, 'voxtral'), to: converted, format: 'q4' }, () => {}, 4 * 2 ** 20);
}, 300_000);

afterAll(() => {
  vi.unstubAllGlobals();
  rmSync(tmp, { recursive: true, force: true });
});

/** GPU buffers as byte arrays: made with data (mapped at creation) or filled by queue.writeBuffer. */
function fakeGpu() {
  const bytes = new Map<GPUBuffer, Uint8Array>();
  const writes: number[] = [];
  const misplaced: string[] = [];
  let drains = 0;
  let live = 0;
  const ctx = {
    limits: { maxStorageBufferBindingSize: 1 << 30, maxBufferSize: 1 << 30 },
    buffer(label: string, size: number, _usage?: number, data?: ArrayBufferView) {
      const padded = Math.max(16, Math.ceil(size / 16) * 16);
      const b = { label, size: padded } as unknown as GPUBuffer;
      const mem = new Uint8Array(padded);
      if (data) mem.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      bytes.set(b, mem);
      live++;
      return b;
    },
    destroy(b: GPUBuffer | undefined) {
      if (b && bytes.delete(b)) live--;
    },
    allocating: async <T>(_what: string, _n: number, fn: () => T) => fn(),
    device: {
      queue: {
        writeBuffer(b: GPUBuffer, offset: number, data: Uint8Array, dataOffset: number, size: number) {
          if (offset % 4 || size % 4 || offset + size > b.size) misplaced.push(`${b.label} ${offset}+${size}`);
          bytes.get(b)!.set(data.subarray(dataOffset, dataOffset + size), offset);
          writes.push(size);
        },
        onSubmittedWorkDone: async () => void drains++,
      },
    },
  } as unknown as GpuContext;
  return { ctx, bytes, writes, misplaced, live: () => live, drains: () => drains };
}

/** A matrix's bytes on the fake device, its parts one after another (compared as Buffers: toEqual is slow on megabytes). */
function matrixBytes(gpu: ReturnType<typeof fakeGpu>, m: GpuMatrix): Buffer {
  return Buffer.concat(m.parts.map((p) => gpu.bytes.get(p.buffer)!));
}

const bytesOf = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** Every array of packed weights, flattened to [name, bytes]. */
function flat(p: PackedDecoderWeights): [string, Buffer][] {
  const out: [string, Buffer][] = [
    ['embed', bytesOf(p.embed.data)],
    ['lm_head', bytesOf(p.lmHead.data)],
    ['norm', bytesOf(p.norm)],
  ];
  p.layers.forEach((l, i) => {
    for (const k of ['qkv', 'o', 'gateUp', 'down'] as const) out.push([`${i}.${k}`, bytesOf(l[k].data)]);
    out.push([`${i}.attnNorm`, bytesOf(l.attnNorm)], [`${i}.mlpNorm`, bytesOf(l.mlpNorm)]);
    if (l.qkvBias) out.push([`${i}.qkvBias`, bytesOf(l.qkvBias)]);
  });
  return out;
}

describe('a converted folder as a packed source', () => {
  it('read whole equals the folder loaded packed; loaded with stream, the model holds no weights', async () => {
    const packed = await loadModel(converted);
    const streamed = await loadModel(converted, undefined, { stream: true });
    expect(streamed.packed).toBeUndefined();
    expect(isPackedSource(streamed.source)).toBe(true);
    expect(streamed.weightBytes).toBe(packed.weightBytes);
    expect(sourceWeightBytes(streamed.source!)).toEqual(packedWeightBytes(packed.packed!));
    expect(() => streamed.weights).toThrow(ModelLoadError);
    const read = await readPackedSource(streamed.source!, { pieceBytes: 4096 });
    const want = packed.packed!;
    expect(read.format).toBe(want.format);
    expect(read.lmHead === read.embed).toBe(want.lmHead === want.embed);
    expect(flat(read).map(([n]) => n)).toEqual(flat(want).map(([n]) => n));
    const [got, exp] = [flat(read), flat(want)];
    expect(got.filter(([, b], i) => !b.equals(exp[i][1])).map(([n]) => n)).toEqual([]);
    for (const k of ['embed', 'lmHead'] as const)
      expect([read[k].format, read[k].rows, read[k].cols]).toEqual([want[k].format, want[k].rows, want[k].cols]);
  });

  it('a shard cut short after loading fails the stream naming the shard', async () => {
    const m = await loadModel(converted, undefined, { stream: true });
    const shard = m.source!.embed.ranges[0].file.source;
    const keep = readFileSync(shard);
    try {
      writeFileSync(shard, keep.subarray(0, m.source!.embed.ranges[0].offset + 100));
      const e = await readPackedSource(m.source!).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ModelLoadError);
      expect((e as ModelLoadError).file).toBe(shard);
      expect(String(e)).toMatch(/truncated/);
    } finally {
      writeFileSync(shard, keep);
    }
  });

  it('the CPU backend given a source reads it whole', async () => {
    const m = await loadModel(converted, undefined, { stream: true });
    const be = await createBackend(m.config, m.source!, {}, { kind: 'cpu' });
    expect(be.label).toMatch(/cpu/i);
    be.dispose();
  });
});

describe('GpuWeights.upload from a source', () => {
  async function both(maxBinding: number, pieceBytes: number) {
    const m = await loadModel(converted, undefined, { stream: true });
    const packed: PackedDecoderWeights = (await loadModel(converted)).packed!;
    const a = fakeGpu();
    const b = fakeGpu();
    const kernels = {} as WeightKernelsOf;
    const seen: number[] = [];
    const fromMemory = await GpuWeights.upload(a.ctx, m.config, packed, maxBinding, kernels);
    const streamed = await GpuWeights.upload(b.ctx, m.config, m.source!, maxBinding, kernels, (l) => seen.push(l), {
      pieceBytes,
    });
    return { m, a, b, fromMemory, streamed, seen };
  }

  it('writes the very bytes the in-memory upload does, in pieces, across the parts of a split embedding', async () => {
    // A binding of 64 KiB splits the miniature's embedding (and head) into row parts; pieces of 1028 bytes (no divisor of a part) straddle them.
    const { a, b, fromMemory, streamed, seen } = await both(64 << 10, 1028);
    expect(streamed.embed.parts.length).toBeGreaterThan(1);
    expect(streamed.embed.parts.map((p) => [p.row0, p.rows])).toEqual(
      fromMemory.embed.parts.map((p) => [p.row0, p.rows]),
    );
    expect(streamed.memory).toEqual(fromMemory.memory);
    const pairs: [GpuMatrix, GpuMatrix][] = [
      [streamed.embed, fromMemory.embed],
      [streamed.lmHead, fromMemory.lmHead],
      ...streamed.layers.flatMap((l, i) => {
        const w = fromMemory.layers[i];
        return [
          [l.qkv, w.qkv],
          [l.o, w.o],
          [l.gateUp, w.gateUp],
          [l.down, w.down],
        ] as [GpuMatrix, GpuMatrix][];
      }),
    ];
    expect(pairs.filter(([s, w]) => !matrixBytes(b, s).equals(matrixBytes(a, w))).map(([s]) => s.name)).toEqual([]);
    const vec = (g: ReturnType<typeof fakeGpu>, x: GPUBuffer) => Buffer.from(g.bytes.get(x)!);
    streamed.layers.forEach((l, i) => {
      const w = fromMemory.layers[i];
      expect(vec(b, l.attnNorm).equals(vec(a, w.attnNorm)), `${i}.attnNorm`).toBe(true);
      expect(vec(b, l.mlpNorm).equals(vec(a, w.mlpNorm)), `${i}.mlpNorm`).toBe(true);
    });
    expect(vec(b, streamed.norm).equals(vec(a, fromMemory.norm))).toBe(true);
    expect(b.misplaced).toEqual([]);
    // No write above a piece; the progress counts every byte once, in order.
    expect(Math.max(...b.writes)).toBeLessThanOrEqual(1028);
    expect(seen.at(-1)).toBe(streamed.memory.total);
    expect(seen.every((x, i) => i === 0 || x >= seen[i - 1])).toBe(true);
  });

  it('a cancel through the progress callback stops the upload and frees every buffer it made', async () => {
    const m = await loadModel(converted, undefined, { stream: true });
    const g = fakeGpu();
    let calls = 0;
    const e = await GpuWeights.upload(
      g.ctx,
      m.config,
      m.source!,
      1 << 30,
      {} as WeightKernelsOf,
      () => {
        if (++calls === 20) throw new CancelledError('', 'upload');
      },
      { pieceBytes: 4096 },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CancelledError);
    expect(g.live()).toBe(0);
  });

  it('an aborted signal ends the stream as the upload’s cancel, every buffer freed', async () => {
    const m = await loadModel(converted, undefined, { stream: true });
    const g = fakeGpu();
    const ac = new AbortController();
    let calls = 0;
    const e = await GpuWeights.upload(
      g.ctx,
      m.config,
      m.source!,
      1 << 30,
      {} as WeightKernelsOf,
      () => {
        if (++calls === 5) ac.abort();
      },
      { pieceBytes: 4096, signal: ac.signal },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CancelledError);
    expect((e as CancelledError).phase).toBe('upload');
    expect(g.live()).toBe(0);
  });
});
