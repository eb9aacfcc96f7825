import { describe, expect, it } from 'vitest';
import { PageAllocator } from '../../src/kv/page-allocator.js';
import { EMPTY, Residency } from '../../src/kv/residency.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import { ContextTooLongError } from '../../src/errors.js';
import { rng } from '../../src/model/testing.js';
import { f16Bits, f16Table } from '../../src/model/f16.js';
import type { PageStorage } from '../../src/kv/storage.js';
import type { StoredRun } from '../../src/kv/offload.js';

const hd = 4;
/** A fake prefill cache whose rows encode (head, position), so misplacement is visible. */
const value = (head: number, seq: number, d: number, isV: boolean) => head * 1e4 + seq + d / 10 + (isV ? 0.05 : 0);

function make(heads: number, audioLength: number, numPages: number, pageSize = 25) {
  const storage = new ArrayPageStorage(hd, numPages * pageSize);
  const r = new Residency({ heads, headDim: hd, pageSize, numPages, audioStart: 1, audioLength }, storage);
  return { r, storage };
}

function source(head: number, seq: number, k: Float32Array, ko: number, v: Float32Array, vo: number) {
  for (let d = 0; d < hd; d++) {
    k[ko + d] = value(head, seq, d, false);
    v[vo + d] = value(head, seq, d, true);
  }
}

function checkSlots(r: Residency, storage: ArrayPageStorage, heads: number, audioLength: number) {
  // Plain checks collected into one assertion: thousands of expect() calls per step are slow.
  const bad: string[] = [];
  for (let h = 0; h < heads; h++) {
    const pages = new Set(r.pageTable(h));
    for (let p = 0; p < audioLength; p++) {
      const slot = r.slotOf(h, p);
      if (slot === EMPTY) continue;
      if (r.positions[slot] !== 1 + p) bad.push(`head ${h} pos ${p}: slot holds ${r.positions[slot]}`);
      if (!pages.has(Math.floor(slot / r.pageSize))) bad.push(`head ${h} pos ${p}: page not in table`);
      for (let d = 0; d < hd; d++) {
        if (storage.k[slot * hd + d] !== Math.fround(value(h, 1 + p, d, false)))
          bad.push(`head ${h} pos ${p}: wrong key`);
      }
    }
  }
  expect(bad.slice(0, 5)).toEqual([]);
}

describe('PageAllocator', () => {
  it('allocates from the free list, frees, and refuses past capacity with a typed error', () => {
    const pool = new PageAllocator({ heads: 2, pageSize: 25, numPages: 3, bytesPerPage: 100 });
    const a = pool.allocPage(0);
    const b = pool.allocPage(1);
    pool.allocPage(1);
    expect(pool.pageTable(1)).toHaveLength(2);
    expect(() => pool.allocPage(0)).toThrow(ContextTooLongError);
    pool.freePage(0, a);
    expect(pool.freePages).toBe(1);
    expect(() => pool.freePage(0, b)).toThrow();
  });
});

describe('Residency', () => {
  it('places prefill rows per head, keeps CPU copies, recalls them bit-identically into holes or fresh pages', () => {
    const heads = 6;
    const N = 4000;
    const { r, storage } = make(heads, N, 2000);
    const rand = rng(3);
    const plan = {
      heads: Array.from({ length: heads }, () => {
        const gpu: number[] = [];
        const cpu: number[] = [];
        for (let p = 0; p < N; p++) (rand() < 0.2 ? gpu : cpu).push(p);
        return { gpu: Int32Array.from(gpu), cpu: Int32Array.from(cpu) };
      }),
    };
    const text = [0, N + 1, N + 2];
    const { gathers } = r.applyPrefill(plan, text, source);
    for (const g of gathers) {
      for (let i = 0; i < g.slots.length; i++) {
        const tmpK = new Float32Array(hd);
        source(g.head, g.seqPositions[i], tmpK, 0, new Float32Array(hd), 0);
        storage.k.set(tmpK, g.slots[i] * hd);
      }
    }
    checkSlots(r, storage, heads, N);
    const s0 = r.stats();
    expect(s0.rGpu).toBeGreaterThan(0.17);
    expect(s0.rGpu).toBeLessThan(0.23);
    expect(s0.rGpuCpu).toBe(1);
    // Recall a whole 25-token segment of CPU positions in head 2, then release it: pages come back.
    const seg = Int32Array.from(plan.heads[2].cpu.filter((p) => p >= 500 && p < 525));
    const pagesBefore = r.pages.usedPages;
    const t = r.apply({ recall: [{ head: 2, positions: seg }], release: [] });
    expect(t.recalledPositions).toBe(seg.length);
    expect(t.bytesToGpu).toBe(seg.length * 8 * hd);
    checkSlots(r, storage, heads, N);
    r.apply({ recall: [], release: [{ head: 2, positions: seg }] });
    expect(r.pages.usedPages).toBe(pagesBefore);
    // Random churn: page count per head stays within ceil(peak live / pageSize) + text pages.
    for (let step = 0; step < 50; step++) {
      const h = Math.floor(rand() * heads);
      const pick = (a: Int32Array) => Int32Array.from(a.filter(() => rand() < 0.05));
      r.apply({
        release: [{ head: h, positions: pick(r.gpuPositions(h)) }],
        recall: [{ head: h, positions: pick(plan.heads[h].cpu) }],
      });
      checkSlots(r, storage, heads, N);
      for (let hh = 0; hh < heads; hh++) {
        const live = r.stats().gpuPerHead[hh];
        expect(r.pageTable(hh).length).toBeLessThanOrEqual(Math.ceil(live / r.pageSize) + 1 + 50);
      }
    }
  });

  it("an f16 pool recalls the offload store's bits as they are where the storage takes stored rows, the same rows either way", () => {
    const N = 300;
    const table = f16Table();
    /** The storage's rows as f32 values, from whichever write it took. */
    const run = (bits: boolean) => {
      const floats = new ArrayPageStorage(hd, 40 * 25);
      const calls = { rows: 0, bits: 0 };
      const storage: PageStorage = {
        writeRows: (slot, count, k, v) => (calls.rows++, floats.writeRows(slot, count, k, v)),
        syncPositions: () => {},
        ...(bits
          ? {
              writeStoredRows: (slot: number, count: number, run: StoredRun) => {
                calls.bits++;
                const k = new Uint16Array(run.bytes.buffer, run.bytes.byteOffset + run.k, count * hd);
                const v = new Uint16Array(run.bytes.buffer, run.bytes.byteOffset + run.v, count * hd);
                for (let i = 0; i < count * hd; i++) {
                  floats.k[slot * hd + i] = table[k[i]];
                  floats.v[slot * hd + i] = table[v[i]];
                }
              },
            }
          : {}),
      };
      const r = new Residency(
        { heads: 2, headDim: hd, pageSize: 25, numPages: 40, audioStart: 1, audioLength: N, kvElementBytes: 2 },
        storage,
      );
      const all = Int32Array.from({ length: N }, (_, p) => p);
      r.applyPrefill({ heads: [0, 1].map(() => ({ gpu: new Int32Array(0), cpu: all })) }, [0], source);
      const positions = Int32Array.from({ length: 60 }, (_, i) => 3 * i + 1);
      r.apply({ recall: [{ head: 1, positions }], release: [] });
      return { values: [...positions].map((p) => floats.k[r.slotOf(1, p) * hd + 1]), calls };
    };
    const viaBits = run(true);
    const viaFloats = run(false);
    expect(viaBits.calls.bits).toBeGreaterThan(0);
    expect(viaFloats.calls.bits).toBe(0);
    expect(viaBits.values).toEqual(viaFloats.values);
    // What was recalled is the f16 rounding of the prefill's row.
    expect(viaBits.values[0]).toBe(table[f16Bits(value(1, 1 + 1, 1, false))]);
  });

  it('text slots are appended per head and never reused by recalls', () => {
    const { r } = make(2, 100, 40, 10);
    const all = Int32Array.from({ length: 100 }, (_, i) => i);
    r.applyPrefill(
      {
        heads: [
          { gpu: all, cpu: all },
          { gpu: new Int32Array(0), cpu: all },
        ],
      },
      [0, 101],
      source,
    );
    const out = new Int32Array(2);
    const textSlots = new Set<number>();
    for (let i = 0; i < 15; i++) {
      r.appendText(102 + i, out);
      textSlots.add(out[0]).add(out[1]);
      r.apply({
        release: [{ head: 0, positions: all.filter((p) => p % 3 === i % 3) }],
        recall: [{ head: 1, positions: all.filter((p) => p % 7 === i % 7) }],
      });
      r.apply({ release: [], recall: [{ head: 0, positions: all }] });
      for (const s of textSlots) expect(r.positions[s]).toBeGreaterThanOrEqual(101);
    }
  });

  it('rejects unsorted or out-of-range plan positions', () => {
    const { r } = make(1, 10, 10);
    expect(() =>
      r.applyPrefill({ heads: [{ gpu: Int32Array.from([3, 2]), cpu: new Int32Array(0) }] }, [0], source),
    ).toThrow(/sorted/);
    expect(() =>
      r.applyPrefill({ heads: [{ gpu: Int32Array.from([10]), cpu: new Int32Array(0) }] }, [0], source),
    ).toThrow(/within/);
  });
});

describe('text slots past their first allocation', () => {
  it('a rewind past many appended tokens frees exactly the later ones, and appends continue after the kept', () => {
    const { r } = make(2, 10, 80, 4);
    r.applyPrefill(
      { heads: [0, 1].map(() => ({ gpu: Int32Array.from([0, 1]), cpu: new Int32Array(0) })) },
      [0],
      source,
    );
    const out = new Int32Array(2);
    const first = 11;
    const slotsOf: number[][] = [];
    // More tokens than a head's first block of text slots holds, so the record of them grows.
    for (let t = 0; t < 100; t++) slotsOf.push([...r.appendText(first + t, out)]);
    r.truncateText(first + 70);
    for (let t = 0; t < 100; t++)
      for (let h = 0; h < 2; h++) expect(r.positions[slotsOf[t][h]]).toBe(t < 70 ? first + t : EMPTY);
    // The next token takes the slot after the last kept one (the same page, its slot free again).
    expect([...r.appendText(first + 70, out)]).toEqual(slotsOf[70]);
  });
});
