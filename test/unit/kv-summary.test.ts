/** Summary slots: one pool slot for a group of dropped positions (kv/summary.ts), from the kernel to the WnW plan. */
import { describe, expect, it } from 'vitest';
import { pagedAttention, EMPTY_SLOT } from '../../src/reference/ops.js';
import { meanRows, slotBias, summaryEntry } from '../../src/kv/summary.js';
import { Residency } from '../../src/kv/residency.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { segmentSummaries, summarySlots } from '../../src/policy/wnw/summaries.js';
import { prefillRGpu } from '../../src/policy/accounting.js';
import { keepInSegment } from '../../src/policy/select.js';
import { ablate, makeLayout, prefillObservation, syntheticHeads } from './policy-fixtures.js';

const hd = 8;

/** Decode attention of one query over slots holding `keys` / `values` ([n, hd]) with these position entries. */
function attend(q: Float32Array, keys: number[][], values: number[][], entries: number[], pageSize = 8): Float32Array {
  const slots = Math.ceil(entries.length / pageSize) * pageSize;
  const k = new Float32Array(slots * hd);
  const v = new Float32Array(slots * hd);
  const pos = new Int32Array(slots).fill(EMPTY_SLOT);
  entries.forEach((e, i) => {
    k.set(keys[i], i * hd);
    v.set(values[i], i * hd);
    pos[i] = e;
  });
  const out = new Float32Array(hd);
  const pages = Array.from({ length: slots / pageSize }, (_, i) => i);
  pagedAttention(q, 0, 1, hd, { pages, pageCount: pages.length }, pageSize, k, v, pos, out, 0);
  return out;
}

const vec = (f: (d: number) => number) => Array.from({ length: hd }, (_, d) => f(d));

describe('summary slot encoding', () => {
  it('carries the count in the position entry, EMPTY being the summary of nothing', () => {
    expect(summaryEntry(1)).toBe(-2);
    expect(summaryEntry(25)).toBe(-26);
    expect(slotBias(summaryEntry(7))).toBeCloseTo(Math.log(7), 12);
    expect(slotBias(EMPTY_SLOT)).toBe(-Infinity);
    expect(() => summaryEntry(0)).toThrow(/count/);
    expect(() => summaryEntry(2.5)).toThrow(/count/);
  });

  it('averages rows in f64', () => {
    const rows = Float32Array.from([1, 10, 3, 20, 5, 30]);
    expect(Array.from(meanRows(rows, 3, 2, new Float32Array(2)))).toEqual([3, 20]);
  });
});

describe('pagedAttention over summary slots', () => {
  const q = Float32Array.from(vec((d) => Math.sin(d + 1)));
  const text = vec((d) => Math.cos(d));
  const textV = vec((d) => d - 3);
  const key = vec((d) => 0.5 * Math.sin(3 * d));
  const val = vec((d) => 2 + d);

  it('a summary of c equal rows attends exactly as the c rows do', () => {
    const c = 5;
    const rows = attend(q, [text, ...Array(c).fill(key)], [textV, ...Array(c).fill(val)], [0, 1, 2, 3, 4, 5]);
    const summary = attend(q, [text, key], [textV, val], [0, summaryEntry(c)]);
    for (let d = 0; d < hd; d++) expect(summary[d]).toBeCloseTo(rows[d], 6);
    // Without the ln(c) bias the text would take more of the mass than it has.
    const plain = attend(q, [text, key], [textV, val], [0, 1]);
    expect(Math.abs(plain[0] - rows[0])).toBeGreaterThan(1e-3);
  });

  it('weights a summary of unequal rows by c · exp(q·k̄), a lower bound on their mass', () => {
    const k1 = vec((d) => 0.3 * Math.cos(d));
    const k2 = vec((d) => -0.2 * Math.sin(2 * d));
    const mean = vec((d) => (k1[d] + k2[d]) / 2);
    const s = (k: number[]) => Math.exp(k.reduce((a, x, d) => a + x * q[d], 0) / Math.sqrt(hd));
    const out = attend(q, [text, mean], [textV, val], [0, summaryEntry(2)]);
    const wSummary = (2 * s(mean)) / (s(text) + 2 * s(mean));
    for (let d = 0; d < hd; d++) expect(out[d]).toBeCloseTo(wSummary * val[d] + (1 - wSummary) * textV[d], 5);
    expect(2 * s(mean)).toBeLessThanOrEqual(s(k1) + s(k2));
  });
});

describe('Residency with summaries', () => {
  const A = 60;
  const source = (h: number, seq: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
    for (let d = 0; d < hd; d++) {
      k[ko + d] = h * 100 + seq + d / 10;
      v[vo + d] = -(h * 100 + seq) - d / 10;
    }
  };

  it('writes each group mean into one GPU slot that r_GPU counts', () => {
    const store = new ArrayPageStorage(hd, 64 * 25);
    const res = new Residency(
      { heads: 2, headDim: hd, pageSize: 25, numPages: 64, audioStart: 1, audioLength: A },
      store,
    );
    const gpu = Int32Array.from([0, 30]);
    const summaries = [Int32Array.from([1, 2, 3]), Int32Array.from([31, 40])];
    res.applyPrefill(
      {
        heads: [
          { gpu, cpu: new Int32Array(0), summaries },
          { gpu: new Int32Array(0), cpu: new Int32Array(0) },
        ],
      },
      [0],
      source,
    );
    const entries = Array.from(res.positions)
      .filter((e) => e < -1)
      .sort();
    expect(entries).toEqual([summaryEntry(3), summaryEntry(2)].sort());
    const slot = res.positions.indexOf(summaryEntry(3));
    // Audio offsets 1, 2, 3 are sequence positions 2, 3, 4: mean 3.
    expect(store.k[slot * hd]).toBeCloseTo(3, 5);
    expect(store.v[slot * hd + 1]).toBeCloseTo(-3.1, 5);
    const st = res.stats();
    expect(st.gpuPerHead[0]).toBe(4);
    expect(st.rGpu).toBeCloseTo(4 / (2 * A), 12);
    expect(
      prefillRGpu(
        {
          heads: [
            { gpu, cpu: new Int32Array(0), summaries },
            { gpu: new Int32Array(0), cpu: new Int32Array(0) },
          ],
        },
        A,
      ),
    ).toBeCloseTo(4 / (2 * A), 12);
  });

  it('refuses a summary over a kept, offloaded or twice-summarised position', () => {
    const make = () =>
      new Residency(
        { heads: 1, headDim: hd, pageSize: 25, numPages: 8, audioStart: 1, audioLength: A },
        new ArrayPageStorage(hd, 64 * 25),
      );
    const plan = (gpu: number[], cpu: number[], groups: number[][]) => ({
      heads: [
        { gpu: Int32Array.from(gpu), cpu: Int32Array.from(cpu), summaries: groups.map((g) => Int32Array.from(g)) },
      ],
    });
    expect(() => make().applyPrefill(plan([5], [], [[5, 6]]), [0], source)).toThrow(/summary 0/);
    expect(() => make().applyPrefill(plan([], [7], [[6, 7]]), [0], source)).toThrow(/summary 0/);
    expect(() =>
      make().applyPrefill(
        plan(
          [],
          [],
          [
            [1, 2],
            [2, 3],
          ],
        ),
        [0],
        source,
      ),
    ).toThrow(/summary 1/);
    expect(() => make().applyPrefill(plan([], [], [[]]), [0], source)).toThrow(/empty/);
  });
});

describe('WnW summaries', () => {
  it('groups what a head drops, per segment or per smaller group', () => {
    const kept = Int32Array.from([0, 4, 9]);
    expect(segmentSummaries(kept, 12, 5).map((g) => Array.from(g))).toEqual([
      [1, 2, 3],
      [5, 6, 7, 8],
      [10, 11],
    ]);
    expect(segmentSummaries(kept, 12, 5, 2).map((g) => Array.from(g))).toEqual([[1], [2, 3], [5, 6], [7, 8], [10, 11]]);
    expect(segmentSummaries(Int32Array.from([0, 1, 2]), 3, 5)).toEqual([]);
    expect(summarySlots(12, 0.2, 5, 'segment')).toBe(3);
    expect(summarySlots(12, 0.2, 5, 'segment', 2)).toBe(7);
    expect(summarySlots(12, 1, 5, 'segment')).toBe(0);
  });

  const layout = makeLayout(4, 8, 760);
  const heads = syntheticHeads(layout, 3);
  const obs = prefillObservation(layout, 5);

  it('gives fixed heads one summary per segment of what they drop, within the budget', () => {
    for (const budget of [0.1, 0.2, 0.4]) {
      const p = new WnwPolicy({ budget, heads, summaries: true });
      const plan = p.prefill(obs);
      const roles = p.state!.roles;
      const n = layout.segmentLength;
      expect(prefillRGpu(plan, layout.audioLength)).toBeLessThanOrEqual(budget + 1e-12);
      if (budget >= 0.2) expect(p.state!.summaryLength).toBe(n);
      if (p.state!.summaryLength === 0) {
        // The budget could not hold one summary per segment: none, and the fit is the plain one.
        expect(plan.heads.every((r) => (r.summaries ?? []).length === 0)).toBe(true);
        continue;
      }
      for (const h of roles.fixed) {
        const r = plan.heads[h];
        const groups = r.summaries ?? [];
        const covered = new Set<number>([...r.gpu]);
        for (const g of groups) {
          expect(new Set(Array.from(g, (x) => Math.floor(x / n))).size).toBe(1);
          for (const x of g) {
            expect(covered.has(x)).toBe(false);
            covered.add(x);
          }
        }
        expect(covered.size).toBe(layout.audioLength);
      }
      for (const h of [...roles.anchors, ...roles.tidal]) expect(plan.heads[h].summaries ?? []).toEqual([]);
      expect(p.state!.prefillRGpu).toBeCloseTo(prefillRGpu(plan, layout.audioLength), 12);
    }
  });

  it('pays for the summaries out of the same budget: fixed heads keep fewer positions', () => {
    const base = new WnwPolicy({ budget: 0.2, heads, summaries: false }).prefill(obs);
    const p = new WnwPolicy({ budget: 0.2, heads, summaries: true });
    const plan = p.prefill(obs);
    const kept = (pl: typeof plan) => p.state!.roles.fixed.reduce((a, h) => a + pl.heads[h].gpu.length, 0);
    expect(kept(plan)).toBeLessThan(kept(base));
    expect(base.heads.every((h) => h.summaries === undefined)).toBe(true);
    expect(plan.heads.some((h) => (h.summaries?.length ?? 0) > 0)).toBe(true);
    expect(() => new WnwPolicy({ budget: 0.2, heads, summaries: 'yes' })).toThrow(/summaries/);
    // Groups finer than the budget holds are made coarser until they fit.
    const fine = new WnwPolicy({ budget: 0.2, heads, summaries: true, summaryLength: 1 });
    const finePlan = fine.prefill(obs);
    expect(fine.state!.summaryLength).toBeGreaterThan(1);
    expect(prefillRGpu(finePlan, layout.audioLength)).toBeLessThanOrEqual(0.2 + 1e-12);
    // A head keeps ⌊retention · n_s⌋ of a segment and summarises the rest.
    const h = p.state!.roles.fixed[0];
    const ret = p.state!.retention[h];
    expect(plan.heads[h].gpu.length).toBe(
      Math.ceil(layout.audioLength / layout.segmentLength - 1) * keepInSegment(ret, layout.segmentLength) +
        keepInSegment(ret, layout.audioLength % layout.segmentLength || layout.segmentLength),
    );
  });
});

describe('WnW anchors option', () => {
  const layout = makeLayout(4, 8, 400);
  const heads = syntheticHeads(layout, 3);
  it('refuses an anchor count the budget cannot hold instead of capping it', () => {
    expect(() => new WnwPolicy({ budget: 0.2, heads, ...ablate({ anchors: 8 }) })).toThrow(
      /8 anchors do not fit: .* at most 3/,
    );
    expect(new WnwPolicy({ budget: 0.2, heads, ...ablate({ anchors: 2 }) }).headRoles.anchors).toHaveLength(2);
  });
});
