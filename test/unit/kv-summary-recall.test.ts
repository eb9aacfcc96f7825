/**
 * Summary slots over what a tidal head holds in CPU memory (kv/recallable-summaries.ts):
 * the slot stands for its group while none of it is on the GPU, weighs nothing while any
 * of it is recalled, and follows its page when the pool grows; WnW's `tidalSummaries`.
 */
import { describe, expect, it } from 'vitest';
import { EMPTY, Residency, type PageStorage } from '../../src/kv/residency.js';
import type { PoolShard } from '../../src/kv/page-allocator.js';
import { pagedAttention } from '../../src/reference/ops.js';
import { summaryEntry } from '../../src/kv/summary.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { prefillRGpu, ResidencyTracker } from '../../src/policy/accounting.js';
import { ArrayPageStorage } from '../helpers/page-store.js';
import { ablate, makeLayout, prefillObservation, rng, stepObservation, syntheticHeads } from './policy-fixtures.js';

const hd = 4;
const A = 24;
const source = (h: number, seq: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
  for (let d = 0; d < hd; d++) {
    k[ko + d] = 0.1 * Math.sin(h + seq * (d + 1));
    v[vo + d] = seq + d / 10;
  }
};
const ints = (a: number[]) => Int32Array.from(a);
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

/** One head: text at sequence 0, audio offsets 0..3 kept, 4..11 in CPU memory as two recallable groups, 12..23 dropped as one. */
function placed(
  store: PageStorage & { k?: Float32Array },
  extra: Partial<ConstructorParameters<typeof Residency>[0]> = {},
) {
  const res = new Residency(
    { heads: 1, headDim: hd, pageSize: 8, numPages: 16, audioStart: 1, audioLength: A, ...extra },
    store,
  );
  const plan = {
    gpu: ints(range(0, 4)),
    cpu: ints(range(4, 12)),
    summaries: [ints(range(4, 8)), ints(range(8, 12)), ints(range(12, 24))],
  };
  const { gathers } = res.applyPrefill({ heads: [plan] }, [0], source);
  return { res, gathers };
}

const summarySlots = (res: Residency) => Array.from(res.positions).flatMap((e, s) => (e < EMPTY ? [[s, e]] : []));

describe('recallable summary slots in the residency', () => {
  it('silences a group while any of it is recalled and restores it once all of it is released', () => {
    const { res } = placed(new ArrayPageStorage(hd, 16 * 8));
    expect(summarySlots(res).map(([, e]) => e)).toEqual([summaryEntry(4), summaryEntry(4), summaryEntry(12)]);
    const [g1, g2, dropped] = summarySlots(res).map(([s]) => s);
    res.apply({ release: [], recall: [{ head: 0, positions: ints([5, 6]) }] });
    expect(res.positions[g1]).toBe(EMPTY);
    expect(res.positions[g2]).toBe(summaryEntry(4));
    expect(res.positions[dropped]).toBe(summaryEntry(12));
    // Half the group back on the CPU: still silent, the other half still resident.
    res.apply({ release: [{ head: 0, positions: ints([5]) }], recall: [] });
    expect(res.positions[g1]).toBe(EMPTY);
    res.apply({ release: [{ head: 0, positions: ints([6]) }], recall: [] });
    expect(res.positions[g1]).toBe(summaryEntry(4));
    // Slots are held for the session: r_GPU counts them whether silent or not.
    expect(res.stats().gpuPerHead[0]).toBe(4 + 3);
  });

  it('attends over a recalled group as over its rows, never the rows and their summary too', () => {
    const store = new ArrayPageStorage(hd, 16 * 8);
    const { res, gathers } = placed(store);
    const row = new Float32Array(hd);
    const vrow = new Float32Array(hd);
    for (const g of gathers)
      g.slots.forEach((slot, i) => {
        source(0, g.seqPositions[i], row, 0, vrow, 0);
        store.writeRows(slot, 1, row, vrow);
      });
    const q = Float32Array.from({ length: hd }, (_, d) => Math.cos(d));
    const attend = () => {
      const out = new Float32Array(hd);
      const pages = res.pageTable(0);
      pagedAttention(
        q,
        0,
        1,
        hd,
        { pages: [...pages], pageCount: pages.length },
        8,
        store.k,
        store.v,
        res.positions,
        out,
        0,
      );
      return out;
    };
    // Everything off the GPU recalled: the two recallable summaries must weigh nothing, so
    // attention equals attention over the rows themselves plus the dropped group's summary.
    res.apply({ release: [], recall: [{ head: 0, positions: ints(range(4, 12)) }] });
    const recalled = attend();
    const ref = new Residency(
      { heads: 1, headDim: hd, pageSize: 8, numPages: 16, audioStart: 1, audioLength: A },
      new ArrayPageStorage(hd, 16 * 8),
    );
    const refStore = new ArrayPageStorage(hd, 16 * 8);
    const ref2 = new Residency(
      { heads: 1, headDim: hd, pageSize: 8, numPages: 16, audioStart: 1, audioLength: A },
      refStore,
    );
    void ref;
    const r2 = ref2.applyPrefill(
      { heads: [{ gpu: ints(range(0, 12)), cpu: ints([]), summaries: [ints(range(12, 24))] }] },
      [0],
      source,
    );
    for (const g of r2.gathers)
      g.slots.forEach((slot, i) => {
        source(0, g.seqPositions[i], row, 0, vrow, 0);
        refStore.writeRows(slot, 1, row, vrow);
      });
    const out = new Float32Array(hd);
    const pages = ref2.pageTable(0);
    pagedAttention(
      q,
      0,
      1,
      hd,
      { pages: [...pages], pageCount: pages.length },
      8,
      refStore.k,
      refStore.v,
      ref2.positions,
      out,
      0,
    );
    for (let d = 0; d < hd; d++) expect(recalled[d]).toBeCloseTo(out[d], 5);
  });

  it('refuses a group that mixes recallable and dropped positions', () => {
    const res = new Residency(
      { heads: 1, headDim: hd, pageSize: 8, numPages: 16, audioStart: 1, audioLength: A },
      new ArrayPageStorage(hd, 16 * 8),
    );
    expect(() =>
      res.applyPrefill({ heads: [{ gpu: ints([]), cpu: ints([4, 5]), summaries: [ints([4, 5, 6])] }] }, [0], source),
    ).toThrow(/wholly dropped or wholly recallable/);
  });

  it('silences the right slot after the pool has grown and moved its pages', () => {
    const P = 4;
    class Moving implements PageStorage {
      writeRows(): void {}
      syncPositions(): void {}
      grow(_from: readonly PoolShard[], _to: readonly PoolShard[]): void {}
    }
    // Two heads in two shards: growth of shard 0 moves every page of shard 1 (head 1).
    const shards: PoolShard[] = [
      { firstHead: 0, heads: 1, firstPage: 0, pages: 6 },
      { firstHead: 1, heads: 1, firstPage: 6, pages: 6 },
    ];
    const res = new Residency(
      { heads: 2, headDim: hd, pageSize: P, numPages: 12, shards, audioStart: 1, audioLength: A, growPages: 2 },
      new Moving(),
    );
    const plan = { gpu: ints([0]), cpu: ints(range(1, A)), summaries: [ints(range(1, 4)), ints(range(4, A))] };
    res.applyPrefill({ heads: [plan, plan] }, [0], source);
    for (let t = 0; t < 40 && res.growths === 0; t++) res.appendText(100 + t, new Int32Array(2));
    expect(res.growths).toBeGreaterThan(0);
    const before = summarySlots(res).length;
    res.apply({ release: [], recall: [{ head: 1, positions: ints([2]) }] });
    // Exactly one slot silenced, and the recalled row's slot holds its own position.
    expect(summarySlots(res).length).toBe(before - 1);
    expect(res.positions[res.slotOf(1, 2)]).toBe(1 + 2);
    const silenced = res
      .pageTable(1)
      .flatMap((pg) => range(pg * P, pg * P + P))
      .filter((s) => res.positions[s] === EMPTY);
    expect(silenced.length).toBeGreaterThan(0);
  });
});

describe('WnW tidalSummaries', () => {
  const layout = makeLayout(4, 8, 760);
  const heads = syntheticHeads(layout, 3);
  const obs = prefillObservation(layout, 5);

  it('gives each tidal head a summary per segment of its CPU part, within the budget', () => {
    for (const budget of [0.2, 0.4]) {
      const p = new WnwPolicy({ budget, heads, ...ablate({ tidalSummaries: true }) });
      const plan = p.prefill(obs);
      expect(prefillRGpu(plan, layout.audioLength)).toBeLessThanOrEqual(budget + 1e-12);
      const roles = p.state!.roles;
      expect(roles.tidal.length).toBeGreaterThan(0);
      for (const h of roles.tidal) {
        const r = plan.heads[h];
        const cpu = new Set(r.cpu);
        const grouped = (r.summaries ?? []).flatMap((g) => Array.from(g));
        // Every CPU position is in exactly one group, and no group holds anything else.
        expect(grouped.length).toBe(r.cpu.length);
        expect(grouped.every((x) => cpu.has(x))).toBe(true);
        if (r.cpu.length) expect((r.summaries ?? []).length).toBeGreaterThan(0);
      }
      // Without the option the tidal heads keep none, as before.
      const plain = new WnwPolicy({ budget, heads }).prefill(obs);
      for (const h of roles.tidal) expect(plain.heads[h].summaries ?? []).toEqual([]);
    }
  });

  it('keeps r_GPU within budget through recalls, and refuses the option without summaries', () => {
    const p = new WnwPolicy({ budget: 0.2, heads, ...ablate({ tidalSummaries: true }) });
    const plan = p.prefill(obs);
    const tracker = new ResidencyTracker(layout, plan);
    const req = p.request(layout);
    const r = rng(9);
    for (let t = 0; t < 60; t++) {
      tracker.apply(p.afterStep(stepObservation(layout, req, tracker, t, (t * 13) % layout.audioLength, r)));
      expect(tracker.rGpu()).toBeLessThanOrEqual(0.2 + 1e-9);
    }
    expect(() => new WnwPolicy({ budget: 0.2, heads, summaries: false, ...ablate({ tidalSummaries: true }) })).toThrow(
      /needs summaries/,
    );
    expect(() => new WnwPolicy({ budget: 0.2, heads, ...ablate({ tidalSummaries: 'yes' }) })).toThrow(/tidalSummaries/);
  });
});
