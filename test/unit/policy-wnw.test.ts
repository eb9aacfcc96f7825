/** WnW: prefill roles and segment-wise selection, the chunk scheduler, and recall/release through the real Residency. */
import { describe, expect, it } from 'vitest';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { ChunkScheduler, PAPER_CHUNKS } from '../../src/policy/wnw/chunks.js';
import { ResidencyTracker } from '../../src/policy/accounting.js';
import { Residency, EMPTY, type PageStorage } from '../../src/kv/residency.js';
import type { HeadsFile } from '../../src/model/heads.js';
import type { PolicyLayout, StepObservation } from '../../src/kv/plan.js';
import { keepInSegment } from '../../src/policy/select.js';
import { ablate, makeLayout, prefillObservation, rng, stepObservation, syntheticHeads } from './policy-fixtures.js';

/** 1 layer × 4 KV heads: head 0 anchor, 1 and 2 tidal, 3 fixed. */
function handHeads(): HeadsFile {
  return {
    model: 'hand',
    numLayers: 1,
    numKvHeads: 4,
    voiceScore: [0.9, 0.8, 0.7, 0.1],
    headSensitivity: [1, 1, 1, 1],
    roles: {
      '0.5': { anchors: [0], tidal: [1, 2], fixed: [3], retention: [1, 0.2, 0.4, 0.2], lambda: 1, measuredRGpu: 0.45 },
    },
  };
}

/** Anchor attention of 1 on every position of the given segments (the runtime's export for head 0). */
function anchorStep(layout: PolicyLayout, step: number, segs: number[], mass = 1): StepObservation {
  const w = new Float32Array(layout.audioLength);
  for (const s of segs)
    for (let p = s * layout.segmentLength; p < Math.min(layout.audioLength, (s + 1) * layout.segmentLength); p++)
      w[p] = mass;
  return { step, weights: [w] };
}

describe('WnW prefill', () => {
  const layout = makeLayout(1, 4, 250);
  const obs = prefillObservation(layout, 1);

  it('asks for the anchors at decode and the instruction rows at prefill', () => {
    const p = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false });
    // The anchors' weights are reduced to the paper's chunk choice (4 s chunks, top 3) on the device.
    expect(p.request(layout)).toEqual({
      decodeHeads: [0],
      decodeWeights: false,
      decodeChunks: { heads: 1, chunkSegments: 2, topChunks: 3 },
      prefillQueries: 12,
    });
  });

  it('anchors keep all, tidal split GPU/CPU, fixed drop; every segment keeps ⌊retention · n_s⌋', () => {
    const p = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false });
    const plan = p.prefill(obs);
    const T = layout.audioLength;
    expect(plan.heads[0].gpu.length).toBe(T);
    expect(plan.heads[0].cpu.length).toBe(0);
    for (const h of [1, 2]) {
      expect(plan.heads[h].gpu.length + plan.heads[h].cpu.length).toBe(T);
      const gpu = new Set(plan.heads[h].gpu);
      expect(Array.from(plan.heads[h].cpu).some((x) => gpu.has(x))).toBe(false);
    }
    expect(plan.heads[3].cpu.length).toBe(0);
    const ret = [1, 0.2, 0.4, 0.2];
    for (const h of [1, 2, 3]) {
      for (let s = 0; s < 10; s++) {
        const n = Array.from(plan.heads[h].gpu).filter((x) => Math.floor(x / 25) === s).length;
        expect(n).toBe(keepInSegment(ret[h], 25));
      }
    }
    expect(p.state!.prefillRGpu).toBeCloseTo((250 + 50 + 100 + 50) / 1000, 12);
  });

  it('global selection (the ablation) empties segments that segment-wise keeps', () => {
    const seg = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false }).prefill(obs);
    const globalHeads = handHeads();
    globalHeads.roles['0.5'].selection = 'global'; // calibrated for global selection, same retention
    const glob = new WnwPolicy({ budget: 0.5, heads: globalHeads, strictBudget: false, selection: 'global' }).prefill(
      obs,
    );
    const emptySegs = (gpu: Int32Array) => 10 - new Set(Array.from(gpu, (x) => Math.floor(x / 25))).size;
    expect(emptySegs(seg.heads[1].gpu)).toBe(0);
    // The synthetic prefill attention is front-loaded, as the paper measured: global top-k piles up early.
    expect(emptySegs(glob.heads[1].gpu)).toBeGreaterThan(0);
    expect(glob.heads[1].gpu.length).toBe(Math.floor(0.2 * 250));
  });

  it('strict mode re-fits λ for this clip with a recall reserve; paper mode uses the calibrated retention', () => {
    const big = makeLayout(8, 4, 3000);
    const heads = syntheticHeads(big, 3);
    const o = prefillObservation(big, 2);
    const paper = new WnwPolicy({ budget: 0.2, heads, strictBudget: false });
    paper.prefill(o);
    expect(paper.state!.retention).toEqual(heads.roles['0.2'].retention);
    const strict = new WnwPolicy({ budget: 0.2, heads });
    strict.prefill(o);
    expect(strict.state!.prefillRGpu).toBeLessThan(paper.state!.prefillRGpu);
    expect(strict.state!.prefillRGpu).toBeGreaterThan(0.17);
    expect(strict.state!.roles).toEqual({
      anchors: heads.roles['0.2'].anchors,
      tidal: heads.roles['0.2'].tidal,
      fixed: heads.roles['0.2'].fixed,
    });
  });

  it('ablation options re-derive roles from the stored VS and HS: ranking, number of voice heads', () => {
    const big = makeLayout(8, 4, 1000);
    const heads = syntheticHeads(big, 3);
    const o = prefillObservation(big, 2);
    const roles = (opts: Record<string, unknown>) => {
      const p = new WnwPolicy({ budget: 0.2, heads, ...opts });
      p.prefill(o);
      return p.state!.roles;
    };
    const product = roles({});
    expect(roles(ablate({ ranking: 'product' }))).toEqual(product);
    expect(roles(ablate({ ranking: 'voice' }))).not.toEqual(product);
    expect(roles(ablate({ ranking: 'sensitivity' }))).not.toEqual(product);
    const wide = roles(ablate({ nVoice: 20 }));
    expect(wide.anchors.length + wide.tidal.length).toBe(20);
    expect(() => new WnwPolicy({ budget: 0.2, heads, ...ablate({ ranking: 'vs' }) })).toThrow(/ranking/);
  });

  it('maxRetention caps every non-anchor head; scorePower below 1 moves budget to the low-scored heads', () => {
    const big = makeLayout(8, 4, 3000);
    const heads = syntheticHeads(big, 3);
    const o = prefillObservation(big, 2);
    const run = (opts: Record<string, unknown>) => {
      const p = new WnwPolicy({ budget: 0.4, heads, ...opts });
      p.prefill(o);
      return p.state!;
    };
    const plain = run({});
    const capped = run(ablate({ maxRetention: 0.5 }));
    const isAnchor = new Set(capped.roles.anchors);
    expect(plain.retention.some((r, h) => !isAnchor.has(h) && r > 0.5)).toBe(true);
    expect(capped.retention.every((r, h) => isAnchor.has(h) || r <= 0.5)).toBe(true);
    expect(capped.lambda).toBeGreaterThan(plain.lambda);
    expect(capped.prefillRGpu).toBeLessThanOrEqual(0.4);
    // The fixed heads' share of what is kept grows (the best heads' share shrinks).
    const share = (st: typeof plain) =>
      st.roles.fixed.reduce((a, h) => a + st.retention[h], 0) / st.retention.reduce((a, r) => a + r, 0);
    expect(share(run(ablate({ scorePower: 0.5 })))).toBeGreaterThan(share(plain));
    for (const bad of [{ maxRetention: 0 }, { maxRetention: 1.5 }, { scorePower: -1 }, { scorePower: 'x' }]) {
      expect(() => new WnwPolicy({ budget: 0.4, heads, ...ablate(bad) })).toThrow(/maxRetention|scorePower/);
    }
  });

  it('recalls, before the first step, the chunks the anchors attended to in the prompt (prefillRecall)', () => {
    const obs = prefillObservation(layout, 1);
    // The anchor (head 0) looks at segment 7 from the instruction rows.
    const peaked = {
      ...obs,
      scores: obs.scores.map((s, h) =>
        h === 0 ? Float32Array.from(s, (_, p) => (Math.floor(p / 25) === 7 ? 5 : 0.01)) : s,
      ),
    };
    const p = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false });
    const plan = p.prefill(peaked);
    const initial = p.afterPrefill();
    // Paper chunks (two segments, top 3): the best chunks are the two over segment 7.
    expect(p.lastDecision?.chunks.slice(0, 2).sort()).toEqual([6, 7]);
    expect(initial.release).toEqual([]);
    expect(initial.recall.map((m) => m.head)).toEqual([1, 2]);
    for (const m of initial.recall) {
      const cpu = new Set(plan.heads[m.head].cpu);
      expect(Array.from(m.positions).every((x) => cpu.has(x))).toBe(true);
      // Segment 7's whole CPU complement comes back.
      expect(Array.from(m.positions).filter((x) => Math.floor(x / 25) === 7)).toEqual(
        Array.from(plan.heads[m.head].cpu).filter((x) => Math.floor(x / 25) === 7),
      );
    }
    // Once: the next call has nothing, and the option turns it off.
    expect(p.afterPrefill()).toEqual({ recall: [], release: [] });
    const off = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false, prefillRecall: false });
    off.prefill(peaked);
    expect(off.afterPrefill()).toEqual({ recall: [], release: [] });
    // Recalled at step −1: unless chosen again, released once δ = 3 steps have passed (at step 2).
    const q = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false });
    q.prefill(peaked);
    q.afterPrefill();
    const elsewhere = (step: number) => anchorStep(layout, step, [0, 1, 2]);
    expect(q.afterStep(elsewhere(0)).release).toEqual([]);
    expect(q.afterStep(elsewhere(1)).release).toEqual([]);
    expect(q.afterStep(elsewhere(2)).release.map((m) => m.head)).toEqual([1, 2]);
  });

  it('refuses a budget the anchors alone exceed', () => {
    const heads = handHeads();
    expect(() => new WnwPolicy({ budget: 0.2, heads }).prefill(obs)).toThrow(/anchor/);
  });
});

describe('chunk scheduler', () => {
  it('scores chunks by mean attention, 2-segment chunks with 1-segment stride, top 3', () => {
    const sch = new ChunkScheduler(110, 25, PAPER_CHUNKS, new Float64Array(5).fill(1));
    expect(sch.segments).toBe(5);
    expect(sch.chunks).toBe(4);
    const A = new Float64Array(110);
    for (let p = 100; p < 110; p++) A[p] = 1; // last segment is 10 long
    const score = sch.chunkScores(A);
    expect(score[3]).toBeCloseTo(10 / 35, 12); // chunk 3 = segments 3 and 4: 35 positions
    expect(score[0]).toBe(0);
    const d = sch.step(A, 0);
    expect(d.chunks[0]).toBe(3);
    expect(d.chunks.length).toBe(3);
  });

  it('handles a single short segment and empty audio', () => {
    const one = new ChunkScheduler(10, 25, PAPER_CHUNKS, [1]);
    expect(one.step(new Float64Array(10).fill(0.1), 0)).toMatchObject({ chunks: [0], recall: [0] });
    const none = new ChunkScheduler(0, 25, PAPER_CHUNKS, []);
    expect(none.step(new Float64Array(0), 0)).toMatchObject({ chunks: [], recall: [], release: [] });
  });

  it('releases a recalled segment after exactly δ = 3 unselected steps; reselection resets the count', () => {
    const sch = new ChunkScheduler(250, 25, PAPER_CHUNKS, new Float64Array(10).fill(1));
    const at = (seg: number) => {
      const A = new Float64Array(250);
      for (let p = seg * 25; p < seg * 25 + 25; p++) A[p] = 1;
      return A;
    };
    expect(sch.step(at(8), 0).recall).toContain(8);
    expect(sch.step(at(3), 1).release).not.toContain(8);
    expect(sch.step(at(3), 2).release).not.toContain(8);
    expect(sch.step(at(8), 3).recall).not.toContain(8); // still resident, selected again
    expect(sch.step(at(3), 4).release).not.toContain(8);
    expect(sch.step(at(3), 5).release).not.toContain(8);
    expect(sch.step(at(3), 6).release).toContain(8);
    expect(sch.recalled[8]).toBe(0);
  });

  it('under a cap, releases the stalest unselected segment early, and defers what still does not fit', () => {
    const sch = new ChunkScheduler(
      250,
      25,
      { chunkSegments: 1, topChunks: 1, delta: 3 },
      new Float64Array(10).fill(10),
      20,
    );
    const at = (seg: number) => Float64Array.from({ length: 250 }, (_, p) => (Math.floor(p / 25) === seg ? 1 : 0));
    expect(sch.step(at(1), 0).recall).toEqual([1]);
    expect(sch.step(at(2), 1).recall).toEqual([2]);
    const d = sch.step(at(3), 2); // room for two: segment 1 (stalest) goes before δ
    expect(d.release).toEqual([1]);
    expect(d.recall).toEqual([3]);
    const tight = new ChunkScheduler(
      250,
      25,
      { chunkSegments: 1, topChunks: 1, delta: 3 },
      new Float64Array(10).fill(10),
      5,
    );
    expect(tight.step(at(1), 0).deferred).toEqual([1]);
  });

  it("with a lead, selects the segments after the best chosen chunk too, ranked after every chunk's own", () => {
    const at = (...segs: number[]) =>
      Float64Array.from({ length: 250 }, (_, p) => (segs.includes(Math.floor(p / 25)) ? 1 + Math.floor(p / 25) : 0));
    const lead = new ChunkScheduler(
      250,
      25,
      { chunkSegments: 1, topChunks: 2, delta: 3, lead: 1 },
      new Float64Array(10).fill(10),
    );
    expect(lead.step(at(3, 6), 0)).toMatchObject({ chunks: [6, 3], recall: [3, 6, 7] });
    // The last segment has nothing after it.
    expect(lead.step(at(9, 4), 1)).toMatchObject({ chunks: [9, 4], recall: [4, 9] });
    // Under a cap that holds two segments the chunks' own come first: the lead waits.
    const capped = new ChunkScheduler(
      250,
      25,
      { chunkSegments: 1, topChunks: 2, delta: 3, lead: 2 },
      new Float64Array(10).fill(10),
      20,
    );
    expect(capped.step(at(3, 6), 0)).toMatchObject({ recall: [3, 6], deferred: [7, 8] });
    // A lead segment keeps being selected while its chunk is best, so δ does not release it.
    const keep = new ChunkScheduler(
      250,
      25,
      { chunkSegments: 1, topChunks: 1, delta: 1, lead: 1 },
      new Float64Array(10).fill(10),
    );
    keep.step(at(2), 0);
    expect(keep.step(at(2), 1).release).toEqual([]);
    expect(keep.step(at(5), 2).release).toEqual([2, 3]);
  });
});

describe('WnW decode on the real Residency', () => {
  const layout = makeLayout(1, 4, 250, { headDim: 8 });
  const hd = layout.headDim;
  const audioStart = 1;
  const text = [0, ...Array.from({ length: 12 }, (_, i) => audioStart + 250 + i)];
  const seqLen = audioStart + 250 + 12;
  const r = rng(42);
  const origK = Array.from({ length: 4 }, () => Float32Array.from({ length: seqLen * hd }, () => r() * 2 - 1));
  const origV = Array.from({ length: 4 }, () => Float32Array.from({ length: seqLen * hd }, () => r() * 2 - 1));

  function setup() {
    const pageSize = layout.segmentLength;
    const numPages = 200;
    const K = new Float32Array(numPages * pageSize * hd);
    const V = new Float32Array(numPages * pageSize * hd);
    const storage: PageStorage = {
      writeRows(slot, count, k, v) {
        K.set(k.subarray(0, count * hd), slot * hd);
        V.set(v.subarray(0, count * hd), slot * hd);
      },
      syncPositions() {},
    };
    const res = new Residency({ heads: 4, headDim: hd, pageSize, numPages, audioStart, audioLength: 250 }, storage);
    const policy = new WnwPolicy({ budget: 0.5, heads: handHeads(), strictBudget: false });
    const plan = policy.prefill(prefillObservation(layout, 1));
    const { gathers } = res.applyPrefill(plan, text, (h, pos, k, ko, v, vo) => {
      k.set(origK[h].subarray(pos * hd, pos * hd + hd), ko);
      v.set(origV[h].subarray(pos * hd, pos * hd + hd), vo);
    });
    for (const g of gathers) {
      for (let i = 0; i < g.slots.length; i++) {
        const s = g.seqPositions[i];
        storage.writeRows(
          g.slots[i],
          1,
          origK[g.head].subarray(s * hd, s * hd + hd),
          origV[g.head].subarray(s * hd, s * hd + hd),
        );
      }
    }
    /** Every resident audio row of every head equals the original KV, bit for bit. */
    const checkContents = () => {
      for (let h = 0; h < 4; h++) {
        for (let pos = 0; pos < 250; pos++) {
          const slot = res.slotOf(h, pos);
          if (slot === EMPTY) continue;
          const s = audioStart + pos;
          expect(K.subarray(slot * hd, slot * hd + hd)).toEqual(origK[h].subarray(s * hd, s * hd + hd));
          expect(V.subarray(slot * hd, slot * hd + hd)).toEqual(origV[h].subarray(s * hd, s * hd + hd));
        }
      }
    };
    return { res, policy, plan, checkContents };
  }

  it('a tidal segment unselected for 3 steps leaves the GPU, keeps its CPU copy, and comes back bit-identical', () => {
    const { res, policy, plan, checkContents } = setup();
    checkContents();
    const seg8 = Array.from({ length: 25 }, (_, i) => 200 + i);
    const onGpu = (h: number) => seg8.filter((p) => res.slotOf(h, p) !== EMPTY).length;
    const prefillKept = (h: number) => seg8.filter((p) => plan.heads[h].gpu.includes(p)).length;

    res.apply(policy.afterStep(anchorStep(layout, 0, [8])));
    for (const h of [1, 2]) expect(onGpu(h)).toBe(25); // recalled: the CPU complement joined the prefill picks
    expect(onGpu(3)).toBe(prefillKept(3)); // fixed heads never move
    checkContents();

    for (let s = 1; s <= 3; s++) {
      const plan3 = policy.afterStep(anchorStep(layout, s, [3]));
      res.apply(plan3);
      for (const h of [1, 2]) expect(onGpu(h)).toBe(s < 3 ? 25 : prefillKept(h));
    }
    for (const h of [1, 2]) {
      for (const p of seg8) {
        if (plan.heads[h].gpu.includes(p))
          expect(res.slotOf(h, p)).not.toBe(EMPTY); // release drops only what was recalled
        else expect(res.offload.has(h, p)).toBe(true); // the CPU copy stays
      }
    }

    const back = policy.afterStep(anchorStep(layout, 4, [8]));
    expect(back.recall.map((m) => m.head)).toEqual([1, 2]);
    const t = res.apply(back);
    // Chunks 7 and 8 (segments 7–9) and the tie-break chunk 0 (segments 0, 1, still resident).
    expect(policy.lastDecision!.recall).toEqual([7, 8, 9]);
    const cpuIn = (h: number, lo: number, hi: number) =>
      Array.from(plan.heads[h].cpu).filter((p) => p >= lo && p < hi).length;
    expect(t.recalledPositions).toBe(cpuIn(1, 175, 250) + cpuIn(2, 175, 250));
    for (const h of [1, 2]) expect(onGpu(h)).toBe(25);
    checkContents();
  });

  it('A is reset every step: a huge past peak does not outvote the current step', () => {
    const { policy } = setup();
    policy.afterStep(anchorStep(layout, 0, [8], 1000));
    policy.afterStep(anchorStep(layout, 1, [3], 0.001));
    expect(policy.lastDecision!.chunks.slice(0, 2).sort()).toEqual([2, 3]);
  });

  it('over many random steps tidal heads never drop below their prefill selection; anchors and fixed never move', () => {
    const big = makeLayout(4, 4, 1500);
    const heads = syntheticHeads(big, 5);
    const policy = new WnwPolicy({ budget: 0.2, heads });
    const plan = policy.prefill(prefillObservation(big, 8));
    const tracker = new ResidencyTracker(big, plan);
    const req = policy.request(big);
    const rr = rng(1);
    const tidal = new Set(policy.headRoles.tidal);
    for (let s = 0; s < 150; s++) {
      const p = policy.afterStep(stepObservation(big, req, tracker, s, Math.floor(rr() * 1500), rr));
      for (const m of [...p.recall, ...p.release]) expect(tidal.has(m.head)).toBe(true);
      tracker.apply(p);
    }
    for (const h of policy.headRoles.tidal)
      for (const pos of plan.heads[h].gpu) expect(tracker.onGpu(h, pos)).toBe(true);
  });
});
