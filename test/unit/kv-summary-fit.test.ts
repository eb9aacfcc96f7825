/** Summary slots fitted to the queries that chose what to drop (kv/summary.ts `summarise`), through the residency and WnW's request. */
import { describe, expect, it } from 'vitest';
import { pagedAttention, EMPTY_SLOT } from '../../src/reference/ops.js';
import { summarise, summaryEntry } from '../../src/kv/summary.js';
import { Residency } from '../../src/kv/residency.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import { summaryPlacement } from '../../src/kv/prompt.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { makeLayout, syntheticHeads } from './policy-fixtures.js';
import { referenceConfig } from '../../src/model/testing.js';

const hd = 8;

/** A deterministic pseudo-random row of `hd` in [-amp, amp). */
function row(seed: number, amp: number): Float32Array {
  let x = (seed * 2654435761) >>> 0;
  return Float32Array.from({ length: hd }, () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return amp * (2 * (x / 2 ** 32) - 1);
  });
}

const rows = (n: number, seed: number, amp: number) => {
  const out = new Float32Array(n * hd);
  for (let i = 0; i < n; i++) out.set(row(seed + i, amp), i * hd);
  return out;
};

/** Decode attention of `q` over slots (keys, values [n, hd]) with these position entries, as the CPU kernel runs it. */
function attend(q: Float32Array, k: Float32Array, v: Float32Array, entries: number[], pageSize = 64): Float32Array {
  const slots = Math.ceil(entries.length / pageSize) * pageSize;
  const K = new Float32Array(slots * hd);
  const V = new Float32Array(slots * hd);
  K.set(k);
  V.set(v);
  const pos = new Int32Array(slots).fill(EMPTY_SLOT);
  pos.set(entries);
  const out = new Float32Array(hd);
  const pages = Array.from({ length: slots / pageSize }, (_, i) => i);
  pagedAttention(q, 0, 1, hd, { pages, pageCount: pages.length }, pageSize, K, V, pos, out, 0);
  return out;
}

const concat = (...a: Float32Array[]) => {
  const out = new Float32Array(a.reduce((n, x) => n + x.length, 0));
  let o = 0;
  for (const x of a) {
    out.set(x, o);
    o += x.length;
  }
  return out;
};

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

describe('summarise', () => {
  const c = 40;
  // Keys whose scores spread (amp 2 over 8 dims): the plain mean under-counts their mass.
  const k = rows(c, 1, 2);
  const v = rows(c, 100, 1);
  const q = row(7, 1.5);
  const text = row(9, 1);
  const textV = row(11, 1);
  const exact = attend(q, concat(text, k), concat(textV, v), [0, ...Array.from({ length: c }, (_, i) => i + 1)]);
  const viaSummary = (fit: 'mean' | 'value' | 'mass') => {
    const s = summarise(k, v, c, hd, fit, q);
    return { s, out: attend(q, concat(text, s.key), concat(textV, s.value), [0, summaryEntry(s.count)]) };
  };

  it('fitted to one query, attends as the group does under that query (up to the whole count)', () => {
    const mass = viaSummary('mass');
    expect(mass.s.count).toBeGreaterThan(c);
    // The count is whole: a mass off by at most half a position in c · e^δ.
    expect(maxDiff(mass.out, exact)).toBeLessThan(0.5 / mass.s.count);
    const mean = viaSummary('mean');
    expect(mean.s.count).toBe(c);
    expect(maxDiff(mean.out, exact)).toBeGreaterThan(20 * maxDiff(mass.out, exact));
  });

  it("'value' weighs the values as the query does and keeps the count", () => {
    const { s } = viaSummary('value');
    expect(s.count).toBe(c);
    const scores = Array.from(
      { length: c },
      (_, i) => k.subarray(i * hd, (i + 1) * hd).reduce((a, x, d) => a + x * q[d], 0) / Math.sqrt(hd),
    );
    const max = Math.max(...scores);
    const w = scores.map((x) => Math.exp(x - max));
    const sum = w.reduce((a, b) => a + b, 0);
    for (let d = 0; d < hd; d++)
      expect(s.value[d]).toBeCloseTo(
        w.reduce((a, wi, i) => a + (wi / sum) * v[i * hd + d], 0),
        5,
      );
    expect(Array.from(s.key)).toEqual(Array.from(summarise(k, v, c, hd).key));
  });

  it('averages the gap over several queries, never below the group size, and is the mean without queries', () => {
    const qs = concat(row(7, 1.5), row(8, 1.5), row(13, 0.1));
    const s = summarise(k, v, c, hd, 'mass', qs);
    const one = [row(7, 1.5), row(8, 1.5), row(13, 0.1)].map((x) =>
      Math.log(summarise(k, v, c, hd, 'mass', x).count / c),
    );
    expect(Math.log(s.count / c)).toBeCloseTo(one.reduce((a, b) => a + b, 0) / 3, 1);
    const equal = rows(1, 3, 1);
    const same = concat(...Array.from({ length: 6 }, () => equal));
    expect(summarise(same, same, 6, hd, 'mass', qs).count).toBe(6);
    expect(summarise(k, v, c, hd, 'mass').count).toBe(c);
  });
});

describe('summary placement', () => {
  it('hands each KV head the queries of its group and fits its slots to them', () => {
    const c = referenceConfig();
    const G = c.numHeads / c.numKvHeads;
    const QD = c.numHeads * c.headDim;
    const layerQ = (l: number) => Float32Array.from({ length: 2 * QD }, (_, i) => l * 1000 + i);
    const place = summaryPlacement(c, { fit: 'mass' }, layerQ);
    const head = c.numKvHeads + 1; // layer 1, KV head 1
    const q = place.queries(head)!;
    expect(q.length).toBe(2 * G * c.headDim);
    // Row 1's query heads of KV head 1 start at 1 · QD + G · headDim in the layer's rows.
    expect(q[G * c.headDim]).toBe(1000 + QD + G * c.headDim);
    expect(q[0]).toBe(1000 + G * c.headDim);
  });

  it('writes the fitted slot where the plan puts a summary', () => {
    const A = 30;
    const k = rows(A, 1, 2);
    const v = rows(A, 100, 1);
    const q = row(7, 1.5);
    const source = (_h: number, seq: number, kk: Float32Array, ko: number, vv: Float32Array, vo: number) => {
      kk.set(k.subarray((seq - 1) * hd, seq * hd), ko);
      vv.set(v.subarray((seq - 1) * hd, seq * hd), vo);
    };
    const store = new ArrayPageStorage(hd, 16 * 25);
    const res = new Residency(
      { heads: 1, headDim: hd, pageSize: 25, numPages: 16, audioStart: 1, audioLength: A },
      store,
    );
    const group = Int32Array.from({ length: 20 }, (_, i) => i + 5);
    res.applyPrefill(
      { heads: [{ gpu: Int32Array.from([0]), cpu: new Int32Array(0), summaries: [group] }] },
      [0],
      source,
      { fit: 'mass', queries: () => q },
    );
    const want = summarise(k.slice(5 * hd, 25 * hd), v.slice(5 * hd, 25 * hd), 20, hd, 'mass', q);
    const slot = Array.from(res.positions).findIndex((e) => e < EMPTY_SLOT);
    expect(res.positions[slot]).toBe(summaryEntry(want.count));
    expect(want.count).toBeGreaterThan(20);
    expect(Array.from(store.v.subarray(slot * hd, (slot + 1) * hd))).toEqual(Array.from(want.value));
  });
});

describe('WnW summaryFit', () => {
  const layout = makeLayout(4, 8, 400);
  const heads = syntheticHeads(layout, 3);
  it('places query-fitted summaries where it keeps summaries (the instruction queries kept for them), and checks the option', () => {
    const fitted = (opts: Record<string, unknown>) => {
      const p = new WnwPolicy({ budget: 0.2, heads, ...opts });
      return { fit: p.fitting?.fit, keepsQueries: p.request(layout).instructionQueries === true };
    };
    expect(fitted({})).toEqual({ fit: 'mass', keepsQueries: true });
    expect(fitted({ summaryFit: 'mean' })).toEqual({ fit: 'mean', keepsQueries: false });
    expect(fitted({ summaries: false })).toEqual({ fit: undefined, keepsQueries: false });
    expect(() => new WnwPolicy({ budget: 0.2, heads, summaryFit: 'median' })).toThrow(/summaryFit/);
  });
});
