import { describe, expect, it } from 'vitest';
import { OffloadStore } from '../../src/kv/offload.js';
import { Residency } from '../../src/kv/residency.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import type { PageStorage } from '../../src/kv/storage.js';

const hd = 4;
const row = (head: number, pos: number, isV: boolean) =>
  Float32Array.from({ length: hd }, (_, d) => head * 1000 + pos + d / 8 + (isV ? 0.5 : 0));

describe('offload store runs', () => {
  it('views rows that follow each other in one chunk, and stops a run at a chunk boundary or a row out of order', () => {
    for (const elementBytes of [4, 2]) {
      // 7 rows a chunk.
      const s = new OffloadStore(hd, 100, 7 * 2 * elementBytes * hd, elementBytes);
      // Head 0's positions 0..9 in order, then head 1's 0..2, then head 0's 10..12: rows 0..9, 10..12, 13..15.
      for (let p = 0; p < 10; p++) s.put(0, p, row(0, p, false), 0, row(0, p, true), 0);
      for (let p = 0; p < 3; p++) s.put(1, p, row(1, p, false), 0, row(1, p, true), 0);
      for (let p = 10; p < 13; p++) s.put(0, p, row(0, p, false), 0, row(0, p, true), 0);
      const all = Array.from({ length: 13 }, (_, p) => p);
      expect(s.runLength(0, all, 0, 13)).toBe(7); // rows 0..6 fill the first chunk
      expect(s.runLength(0, all, 7, 6)).toBe(3); // rows 7..9; position 10 sits in row 13
      expect(s.runLength(0, all, 10, 3)).toBe(1); // row 13 is the last of chunk 1
      expect(s.runLength(0, all, 2, 3)).toBe(3); // never past `max`
      expect(s.runLength(0, [1, 3], 0, 2)).toBe(1); // rows 1 and 3 do not follow each other
      const k = new Float32Array(hd);
      const v = new Float32Array(hd);
      for (const [from, n] of [
        [0, 7],
        [7, 3],
        [11, 2],
      ]) {
        const run = s.run(0, all[from], n);
        expect(run.length).toBe(n * hd * elementBytes);
        const view = (at: number) =>
          elementBytes === 2
            ? new Uint16Array(run.bytes.buffer, run.bytes.byteOffset + at, n * hd)
            : new Float32Array(run.bytes.buffer, run.bytes.byteOffset + at, n * hd);
        const [rk, rv] = [view(run.k), view(run.v)];
        for (let r = 0; r < n; r++) {
          s.get(0, from + r, k, 0, v, 0);
          if (elementBytes === 2) {
            const bk = new Uint16Array(hd);
            const bv = new Uint16Array(hd);
            s.getBits(0, from + r, bk, 0, bv, 0);
            expect([...rk.subarray(r * hd, (r + 1) * hd)]).toEqual([...bk]);
            expect([...rv.subarray(r * hd, (r + 1) * hd)]).toEqual([...bv]);
          } else {
            expect([...rk.subarray(r * hd, (r + 1) * hd)]).toEqual([...k]);
            expect([...rv.subarray(r * hd, (r + 1) * hd)]).toEqual([...v]);
            expect([...k]).toEqual([...row(0, from + r, false)]);
          }
        }
      }
      expect(() => s.runLength(1, [5], 0, 1)).toThrow(/no CPU copy of head 1 position 5/);
      s.delete(0, 3);
      expect(s.has(0, 3)).toBe(false);
      expect(s.rows).toBe(15);
    }
  });

  it('a recalled segment goes to the storage as one write per page run, the rows each where the store had them', () => {
    const N = 200;
    const calls: number[] = [];
    const floats = new ArrayPageStorage(hd, 40 * 25);
    const storage: PageStorage = {
      writeRows: (slot, count, k, v) => (calls.push(count), floats.writeRows(slot, count, k, v)),
      syncPositions: () => {},
    };
    const r = new Residency(
      { heads: 2, headDim: hd, pageSize: 25, numPages: 40, audioStart: 1, audioLength: N },
      storage,
    );
    const all = Int32Array.from({ length: N }, (_, p) => p);
    r.applyPrefill(
      { heads: [0, 1].map(() => ({ gpu: new Int32Array(0), cpu: all })) },
      [0],
      (h, seq, k, ko, v, vo) => (k.set(row(h, seq - 1, false), ko), v.set(row(h, seq - 1, true), vo)),
    );
    calls.length = 0;
    // 50 positions in two runs of the store (a hole at 130): pages of 25 take them as 25 + 5 + 20.
    const positions = Int32Array.from([
      ...Array.from({ length: 30 }, (_, i) => 100 + i),
      ...Array.from({ length: 20 }, (_, i) => 131 + i),
    ]);
    r.apply({ recall: [{ head: 1, positions }], release: [] });
    expect(calls).toEqual([25, 5, 20]);
    for (const p of positions) {
      const slot = r.slotOf(1, p);
      expect([...floats.k.subarray(slot * hd, (slot + 1) * hd)]).toEqual([...row(1, p, false)]);
      expect([...floats.v.subarray(slot * hd, (slot + 1) * hd)]).toEqual([...row(1, p, true)]);
    }
  });
});
