/**
 * What the pool uploads per decode step on WebGPU (src/backend/webgpu/pool.ts flush), on a
 * recording stand-in for the device: the full cache's steady steps write the new text
 * slots' positions and the page-table entries that changed, a bound that does not grow with
 * the audio, where the whole table (and, at the pool's growth, every slot's position) was
 * written again.
 */
import { describe, expect, it } from 'vitest';
import { GpuPool } from '../../src/backend/webgpu/pool.js';
import { PageTables, TABLE_SLACK } from '../../src/backend/webgpu/page-tables.js';
import { poolLayout, residencyShards } from '../../src/backend/webgpu/pool-layout.js';
import { Residency } from '../../src/kv/residency.js';
import { PageAllocator } from '../../src/kv/page-allocator.js';
import { poolNeed } from '../../src/kv/sizing.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { audioStart, kvHeadCount, segmentLength } from '../../src/model/config.js';
import type { GpuContext } from '../../src/gpu/device.js';
import type { PrefillPlan } from '../../src/kv/plan.js';

(globalThis as { GPUBufferUsage?: unknown }).GPUBufferUsage ??= { COPY_SRC: 4, COPY_DST: 8, STORAGE: 128, MAP_READ: 1 };

/** Buffers that keep their bytes, a queue that writes into them, copies done at submit. */
function fakeContext() {
  let written = 0;
  const pending: (() => void)[] = [];
  const mem = new Map<unknown, Uint8Array>();
  const ctx = {
    buffer: (label: string, size: number) => {
      const b = { label, size };
      mem.set(b, new Uint8Array(size));
      return b;
    },
    destroy: () => {},
    device: {
      queue: {
        writeBuffer: (b: unknown, off: number, data: ArrayBuffer | ArrayBufferView, dataOff = 0, size?: number) => {
          const src = ArrayBuffer.isView(data)
            ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
            : new Uint8Array(data);
          const n = size ?? src.byteLength - dataOff;
          mem.get(b)!.set(src.subarray(dataOff, dataOff + n), off);
          written += n;
        },
        submit: () => {
          for (const f of pending.splice(0)) f();
        },
      },
      createCommandEncoder: () => ({
        copyBufferToBuffer: (s: unknown, so: number, d: unknown, d0: number, size: number) => {
          pending.push(() => mem.get(d)!.set(mem.get(s)!.slice(so, so + size), d0));
        },
        finish: () => ({}),
      }),
      pushErrorScope: () => {},
      popErrorScope: () => Promise.resolve(null),
    },
  } as unknown as GpuContext;
  return { ctx, written: () => written, bytesOf: (b: GPUBuffer) => mem.get(b)! };
}

/** A full-cache session on the Voxtral shape (2 layers) over `minutes` of audio: bytes each of `steps` steps uploads. */
function fullCacheSteps(minutes: number, steps: number) {
  const c = shapeConfig('voxtral-mini-3b', 2);
  const A = Math.round(minutes * 60 * c.audio.tokensPerSecond);
  const heads = kvHeadCount(c);
  const P = segmentLength(c);
  const all = Int32Array.from({ length: A }, (_, i) => i);
  const plan: PrefillPlan = { heads: Array.from({ length: heads }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
  const start = audioStart(c);
  const text = [...Array.from({ length: start }, (_, i) => i), ...Array.from({ length: 7 }, (_, i) => start + A + i)];
  const layout = poolLayout(c, poolNeed(plan, P, text.length).perHead, P, 2 ** 30, 4, 8);
  const f = fakeContext();
  const pool = new GpuPool(f.ctx, c, layout, new Uint32Array(heads).fill(0xffffffff));
  const res = new Residency(
    {
      heads,
      headDim: c.headDim,
      pageSize: P,
      numPages: layout.capacityPages,
      shards: residencyShards(c, layout),
      audioStart: start,
      audioLength: A,
      growPages: 8,
    },
    pool,
  );
  res.applyPrefill(plan, text, () => {});
  pool.flush(res.pages);
  const slots = new Int32Array(heads);
  const perStep: number[] = [];
  for (let t = 0; t < steps; t++) {
    const before = f.written();
    res.appendText(start + A + 7 + t, slots);
    pool.flush(res.pages);
    f.ctx.device.queue.submit([]);
    perStep.push(f.written() - before);
  }
  return { perStep, growths: res.growths, pool, res, bytesOf: f.bytesOf };
}

describe("the pool's uploads per decode step", () => {
  it("full cache: the same bytes a step at 1 and at 10 minutes, across text pages and the pool's growth", () => {
    const short = fullCacheSteps(1, 240);
    const long = fullCacheSteps(10, 240);
    expect(long.growths).toBeGreaterThan(0);
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    console.log(
      `bytes/step: 1 min mean ${mean(short.perStep).toFixed(1)} max ${Math.max(...short.perStep)}; 10 min mean ${mean(long.perStep).toFixed(1)} max ${Math.max(...long.perStep)}`,
    );
    expect(long.perStep).toEqual(short.perStep);
    // Most steps: each head's new text slot (4 bytes a head); a new text page adds its table entries.
    const heads = 2 * 8;
    expect(long.perStep.filter((b) => b === 4 * heads).length).toBeGreaterThan(200);
    expect(mean(long.perStep)).toBeLessThan(256);
    // A growth writes its new pages' slots (EMPTY), not the pool's.
    expect(Math.max(...long.perStep)).toBeLessThan(16 * 1024);
  });

  it("what the GPU holds after the steps is the residency's tables and positions", () => {
    const { pool, res, bytesOf, growths } = fullCacheSteps(2, 120);
    expect(growths).toBeGreaterThan(0);
    const pos = new Int32Array(bytesOf(pool.positions).buffer.slice(0));
    expect(Array.from(pos.subarray(0, res.positions.length))).toEqual(Array.from(res.positions));
    const t = new Uint32Array(bytesOf(pool.tables).buffer.slice(0));
    for (let h = 0; h < res.pages.heads; h++) {
      const [off, count] = [t[h * 4], t[h * 4 + 1]];
      expect(Array.from(t.subarray(off, off + count))).toEqual([...res.pageTable(h)]);
    }
  });
});

describe('page tables with room per head', () => {
  it('write every list once, then only what changed; a list outgrowing its room lays all out anew', () => {
    const pool = new PageAllocator({ heads: 2, pageSize: 4, numPages: 100, bytesPerPage: 1 });
    const t = new PageTables(2, 2 * 4 + 100 + 2 * TABLE_SLACK, [0xffffffff, 0]);
    const read = new Set<number>();
    // The pool as the update sees it, noting which heads' lists it reads.
    const src = {
      get changedCount() {
        return pool.changedCount;
      },
      changedFrom: pool.changedFrom,
      pageTable: (h: number) => (read.add(h), pool.pageTable(h)),
    };
    const runs = () => {
      read.clear();
      const n = t.update(src);
      pool.clearChanges();
      return Array.from({ length: n }, (_, r) => [t.runs[2 * r], t.runs[2 * r + 1]]);
    };
    for (const h of [0, 0, 0, 1, 1]) pool.allocPage(h);
    expect(runs()).toEqual([[0, 8 + 3 + TABLE_SLACK + 2 + TABLE_SLACK]]);
    pool.allocPage(0); // one page more for head 0: its count and the new entry, head 1 not read
    expect(runs()).toEqual([
      [1, 2],
      [11, 12],
    ]);
    expect([...read]).toEqual([0]);
    expect(runs()).toEqual([]);
    expect(read.size).toBe(0);
    for (let p = 0; p <= TABLE_SLACK; p++) pool.allocPage(1);
    expect(runs()).toEqual([[0, 8 + 4 + TABLE_SLACK + 3 + 2 * TABLE_SLACK]]);
    // A page freed inside head 0's list: its count and the entries after it (merged, a few apart).
    pool.freePage(0, 1);
    expect(runs()).toEqual([[1, 8 + 3]]);
    expect([...t.data.subarray(8, 8 + 3)]).toEqual([...pool.pageTable(0)]);
  });
});
