/** The mass scale of query-fitted summary slots (kv/summary.ts `summarise`; WnW's `summaryMass`, `summaryMassLayer`), through the placement and the plan. */
import { describe, expect, it } from 'vitest';
import { EMPTY_SLOT } from '../../src/reference/ops.js';
import { summarise, summaryEntry } from '../../src/kv/summary.js';
import { Residency } from '../../src/kv/residency.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import { summaryPlacement } from '../../src/kv/prompt.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { WNW_OPTIONS } from '../../src/policy/wnw/options.js';
import { ablate, makeLayout, syntheticHeads } from './policy-fixtures.js';
import { referenceConfig } from '../../src/model/testing.js';

const hd = 8;

function rows(n: number, seed: number, amp: number): Float32Array {
  let x = (seed * 2654435761) >>> 0;
  return Float32Array.from({ length: n * hd }, () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return amp * (2 * (x / 2 ** 32) - 1);
  });
}

// Keys whose scores spread under the queries, so the gap δ is well above rounding.
const c = 40;
const k = rows(c, 1, 3);
const v = rows(c, 100, 1);
const qs = rows(3, 7, 3);

describe('summarise with a mass scale', () => {
  it('scales the exponent of the count, not the count', () => {
    const whole = summarise(k, v, c, hd, 'mass', qs);
    const half = summarise(k, v, c, hd, 'mass', qs, 0.5);
    expect(whole.count).toBeGreaterThan(4 * c);
    expect(half.count).toBeGreaterThan(c);
    expect(half.count).toBeLessThan(whole.count);
    // ln(count / c) is α·δ, up to the rounding of the counts to whole positions.
    expect(Math.log(half.count / c)).toBeCloseTo(0.5 * Math.log(whole.count / c), 1);
    expect(Array.from(half.value)).toEqual(Array.from(whole.value));
    expect(Array.from(half.key)).toEqual(Array.from(whole.key));
  });

  it("is 'value' at 0 and 'mass' at 1", () => {
    expect(summarise(k, v, c, hd, 'mass', qs, 0)).toEqual(summarise(k, v, c, hd, 'value', qs));
    expect(summarise(k, v, c, hd, 'mass', qs, 1)).toEqual(summarise(k, v, c, hd, 'mass', qs));
  });
});

describe('the placement under a mass scale', () => {
  it('carries the scale to the slot the residency writes', () => {
    const A = 30;
    const kk = rows(A, 1, 2);
    const vv = rows(A, 100, 1);
    const q = rows(1, 7, 1.5);
    const source = (_h: number, seq: number, ko: Float32Array, koff: number, vo: Float32Array, voff: number) => {
      ko.set(kk.subarray((seq - 1) * hd, seq * hd), koff);
      vo.set(vv.subarray((seq - 1) * hd, seq * hd), voff);
    };
    const entryUnder = (massScale?: number) => {
      const res = new Residency(
        { heads: 1, headDim: hd, pageSize: 25, numPages: 16, audioStart: 1, audioLength: A },
        new ArrayPageStorage(hd, 16 * 25),
      );
      const group = Int32Array.from({ length: 20 }, (_, i) => i + 5);
      res.applyPrefill(
        { heads: [{ gpu: Int32Array.from([0]), cpu: new Int32Array(0), summaries: [group] }] },
        [0],
        source,
        { fit: 'mass', massScale: massScale === undefined ? undefined : () => massScale, queries: () => q },
      );
      return Array.from(res.positions).find((e) => e < EMPTY_SLOT)!;
    };
    const want = summarise(kk.slice(5 * hd, 25 * hd), vv.slice(5 * hd, 25 * hd), 20, hd, 'mass', q, 0.5);
    expect(entryUnder(0.5)).toBe(summaryEntry(want.count));
    expect(entryUnder(0.5)).not.toBe(entryUnder());
  });

  it("gives each KV head its layer's scale in the backends' shared placement", () => {
    const cfg = referenceConfig();
    const layerQ = () => new Float32Array(cfg.numHeads * cfg.headDim);
    const place = summaryPlacement(cfg, { fit: 'mass', mass: [0, 0.5, 1, 0.25] }, layerQ);
    expect(place.massScale!(0)).toBe(0);
    expect(place.massScale!(cfg.numKvHeads)).toBe(0.5);
    expect(place.massScale!(3 * cfg.numKvHeads + cfg.numKvHeads - 1)).toBe(0.25);
    expect(summaryPlacement(cfg, { fit: 'mass' }, layerQ).massScale).toBeUndefined();
  });
});

describe('WnW summaryMass, summaryMassLayer', () => {
  const layout = makeLayout(4, 8, 400);
  const heads = syntheticHeads(layout, 3);
  // The method's options as plain keys, the mass scales as an evaluation passes them.
  const mass = (opts: Record<string, unknown>) => {
    const entries = Object.entries(opts);
    const method = Object.fromEntries(entries.filter(([k]) => WNW_OPTIONS.includes(k)));
    const variant = Object.fromEntries(entries.filter(([k]) => !WNW_OPTIONS.includes(k)));
    const p = new WnwPolicy({ budget: 0.2, heads, ...method, ...ablate(variant) });
    p.request(layout);
    return p.fitting?.mass;
  };
  it('hands the placement per-layer scales only where an option sets them', () => {
    expect(mass({ summaryMass: 0.5 })).toEqual([0.5, 0.5, 0.5, 0.5]);
    expect(mass({ summaryMassLayer: 3 })).toEqual([0, 0, 0, 1]);
    expect(mass({ summaryMassLayer: 1, summaryMass: 0.5 })).toEqual([0, 0.5, 0, 0]);
    expect(mass({})).toBeUndefined();
    expect(mass({ summaryMass: 0.5, summaries: false })).toBeUndefined();
  });

  it('refuses a scale or layer it cannot use', () => {
    expect(() => mass({ summaryMass: -1 })).toThrow(/summaryMass/);
    expect(() => mass({ summaryMassLayer: 4 })).toThrow(/summaryMassLayer/);
    expect(() => mass({ summaryMassLayer: 1.5 })).toThrow(/summaryMassLayer/);
    expect(() => mass({ summaryFit: 'mean', summaryMass: 0.5 })).toThrow(/summaryMass/);
    expect(() => mass({ summaryFit: 'value', summaryMassLayer: 3 })).toThrow(/summaryMassLayer/);
  });
});
