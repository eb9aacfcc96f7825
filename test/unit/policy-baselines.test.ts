/** Each baseline does what its paper says, on attention built so the right answer is known. */
import { describe, expect, it } from 'vitest';
import { SnapKVPolicy, windowAudio } from '../../src/policy/snapkv.js';
import { AdaKVPolicy } from '../../src/policy/adakv.js';
import { AudioKVPolicy, allocateBudgets } from '../../src/policy/audiokv.js';
import { H2OPolicy } from '../../src/policy/h2o.js';
import { StreamingPolicy } from '../../src/policy/streaming.js';
import { ArkValePolicy } from '../../src/policy/arkvale.js';
import { QuestPolicy } from '../../src/policy/quest.js';
import { FullPolicy } from '../../src/policy/full.js';
import { createPolicy, POLICIES } from '../../src/policy/registry.js';
import { pool1d, selectByRetention, spectralSmooth, topK, union, complement } from '../../src/policy/select.js';
import type { HeadsFile } from '../../src/model/heads.js';
import type { PrefillObservation } from '../../src/kv/plan.js';
import { makeLayout } from './policy-fixtures.js';

const layout = makeLayout(1, 2, 200, { instructionLength: 12 });

function obsWith(scores: Float32Array[], keys?: Float32Array[]): PrefillObservation {
  return { layout: { ...layout, numKvHeads: scores.length }, scores, keys };
}

function peaks(T: number, at: number[], base = 0.001): Float32Array {
  const s = new Float32Array(T).fill(base);
  for (const p of at) s[p] = 1;
  return s;
}

describe('selection helpers', () => {
  it('topK is sorted by index and breaks ties to the lower index', () => {
    expect(Array.from(topK([1, 3, 3, 2, 3], 2))).toEqual([1, 2]);
    expect(Array.from(topK([5, 1, 9], 9))).toEqual([0, 1, 2]);
    expect(Array.from(topK([5, 1, 9, 7], 1, [0, 1, 3]))).toEqual([3]);
  });
  it('pool1d matches PyTorch avg (zero padding counted) and max pooling', () => {
    expect(Array.from(pool1d([0, 0, 3, 0, 0], 3, 'avg'))).toEqual([0, 1, 1, 1, 0]);
    expect(Array.from(pool1d([0, 0, 3, 0, 0], 3, 'max'))).toEqual([0, 3, 3, 3, 0]);
    expect(Array.from(pool1d([3, 0, 0], 3, 'avg'))).toEqual([1, 1, 0]);
  });
  it('spectral smoothing removes fast alternation and keeps slow trends', () => {
    const n = 256;
    const slow = Float32Array.from({ length: n }, (_, i) => Math.sin((2 * Math.PI * i) / 128));
    const fast = Float32Array.from({ length: n }, (_, i) => slow[i] + (i % 2 ? 1 : -1));
    const lp = spectralSmooth(fast, 1, 32);
    let err = 0;
    for (let i = 10; i < n - 10; i++) err = Math.max(err, Math.abs(lp[i] - slow[i]));
    expect(err).toBeLessThan(0.1);
    const half = spectralSmooth(fast, 0.5, 32);
    expect(half[100]).toBeCloseTo(0.5 * lp[100] + 0.5 * fast[100], 5);
  });
  it('segment-wise and global selection, union, complement', () => {
    const s = Float32Array.from({ length: 50 }, (_, i) => 50 - i);
    expect(Array.from(selectByRetention(s, 0.2, 25))).toEqual([0, 1, 2, 3, 4, 25, 26, 27, 28, 29]);
    expect(Array.from(selectByRetention(s, 0.2, 25, 'global'))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(Array.from(union(Int32Array.of(1, 3), Int32Array.of(2, 3, 9)))).toEqual([1, 2, 3, 9]);
    expect(Array.from(complement(Int32Array.of(0, 2), 4))).toEqual([1, 3]);
  });
});

describe('prefill-only baselines', () => {
  it('SnapKV keeps its window (audio tail when the instruction is short) and the pooled peaks', () => {
    const lay = { ...layout, instructionLength: 30, numKvHeads: 1 };
    expect(windowAudio(lay, 32)).toBe(2);
    const p = new SnapKVPolicy({ budget: 0.1 });
    expect(p.request(lay).prefillQueries).toBe(32);
    const keep = p.prefill({ layout: lay, scores: [peaks(200, [20, 100])] }).heads[0].gpu;
    expect(keep.length).toBe(20);
    expect(Array.from(keep)).toEqual(expect.arrayContaining([198, 199, 20, 100]));
    // Pooling (kernel 7) makes the neighbourhood of a peak win over isolated noise.
    expect(Array.from(keep)).toEqual(expect.arrayContaining([17, 18, 19, 21, 22, 23]));
  });

  it('Ada-KV gives each head ≥ floor_alpha · B and shares the rest layer-wide', () => {
    const strong = Float32Array.from({ length: 200 }, (_, i) => 1 + i / 200);
    const weak = new Float32Array(200).fill(0.01);
    // Instruction ≥ w: the observation window holds no audio, so nothing is forced.
    const plan = new AdaKVPolicy({ budget: 0.1 }).prefill({
      layout: { ...layout, instructionLength: 40 },
      scores: [strong, weak],
    });
    expect(plan.heads[0].gpu.length + plan.heads[1].gpu.length).toBe(40);
    expect(plan.heads[1].gpu.length).toBe(16); // floor: ⌊0.8 · 20⌋
    expect(plan.heads[0].gpu.length).toBe(24);
  });

  it('AudioKV gives grounding heads more budget, totals within r_GPU', () => {
    const b = allocateBudgets([3, 1, 0, 0], 10, 80, 100);
    expect(Array.from(b)).toEqual([40, 20, 10, 10]);
    const capped = allocateBudgets([100, 1], 5, 60, 40);
    expect(capped[0]).toBe(40);
    expect(capped[0] + capped[1]).toBe(60);
    const heads = { voiceScore: [0.9, 0.1] } as HeadsFile;
    const plan = new AudioKVPolicy({ budget: 0.2, heads }).prefill(obsWith([peaks(200, [5]), peaks(200, [5])]));
    expect(plan.heads[0].gpu.length).toBe(56); // 20 base + 0.9 · 40
    expect(plan.heads[1].gpu.length).toBe(24);
    expect(() => new AudioKVPolicy({ budget: 0.2 })).toThrow(/heads file/);
  });

  it('H2O keeps accumulated-attention heavy hitters and a recent window, half each', () => {
    const plan = new H2OPolicy({ budget: 0.05 }).prefill(obsWith([peaks(200, [3, 50, 60, 70, 80, 199])]));
    expect(Array.from(plan.heads[0].gpu)).toEqual([3, 50, 60, 70, 80, 195, 196, 197, 198, 199]);
  });

  it('StreamingLLM keeps 4 audio sinks and the most recent audio', () => {
    const plan = new StreamingPolicy({ budget: 0.05 }).prefill(obsWith([peaks(200, [])]));
    expect(Array.from(plan.heads[0].gpu)).toEqual([0, 1, 2, 3, 194, 195, 196, 197, 198, 199]);
    expect(plan.heads[0].cpu.length).toBe(0);
  });

  it('full keeps everything and exports nothing', () => {
    const p = new FullPolicy();
    expect(p.request(layout).decodeHeads).toEqual([]);
    expect(p.prefill(obsWith([peaks(200, [])])).heads[0].gpu.length).toBe(200);
  });
});

describe('query-aware paged baselines', () => {
  /** Keys: page 4 (positions 128..159) points along +x, every other key is small noise. */
  function keysWithHotPage(T: number, d: number, pageSize: number, hot: number): Float32Array {
    const k = new Float32Array(T * d);
    for (let p = 0; p < T; p++) for (let i = 0; i < d; i++) k[p * d + i] = 0.01 * Math.sin(p * 7 + i);
    for (let p = hot * pageSize; p < (hot + 1) * pageSize; p++) k[p * d] = 5;
    return k;
  }

  it('ArkVale: 2 sinks + 2 recent + top pages by bounding box; recalls the page the query points at', () => {
    const T = 320; // 10 pages of 32
    const lay = { ...layout, audioLength: T, numKvHeads: 1 };
    const p = new ArkValePolicy({ budget: 0.5 });
    const req = p.request(lay);
    expect(req).toMatchObject({ decodeHeads: [0], decodeQueries: true, decodeWeights: false, prefillKeys: true });
    const plan = p.prefill({ layout: lay, scores: [peaks(T, [])], keys: [keysWithHotPage(T, lay.headDim, 32, 6)] });
    expect(plan.heads[0].cpu.length).toBe(T); // full CPU mirror
    const pages = new Set(Array.from(plan.heads[0].gpu, (x) => Math.floor(x / 32)));
    for (const pg of [0, 1, 8, 9]) expect(pages.has(pg)).toBe(true);
    expect(plan.heads[0].gpu.length).toBe(160);
    const q = new Float32Array(lay.groupSize * lay.headDim);
    q[0] = 1;
    q[lay.headDim] = 1;
    const step = p.afterStep({ step: 0, weights: [], queries: [q] });
    const recalled = new Set(Array.from(step.recall[0]?.positions ?? [], (x) => Math.floor(x / 32)));
    const chosenAfter = new Set(
      [...pages]
        .filter((pg) => !step.release[0]?.positions.some((x) => Math.floor(x / 32) === pg))
        .concat([...recalled]),
    );
    expect(chosenAfter.has(6)).toBe(true);
    expect(chosenAfter.size).toBe(5);
  });

  it('Quest: 16-token pages, no forced pages, query-aware every step', () => {
    const T = 160;
    const lay = { ...layout, audioLength: T, numKvHeads: 1 };
    const p = new QuestPolicy({ budget: 0.1 });
    p.prefill({ layout: lay, scores: [peaks(T, [5])], keys: [keysWithHotPage(T, lay.headDim, 16, 7)] });
    const q = new Float32Array(lay.groupSize * lay.headDim);
    q[0] = 1;
    const step = p.afterStep({ step: 0, weights: [], queries: [q] });
    expect(Array.from(step.recall[0].positions)).toEqual(Array.from({ length: 16 }, (_, i) => 112 + i));
    expect(Array.from(step.release[0].positions)).toEqual(Array.from({ length: 16 }, (_, i) => i));
  });
});

describe('registry', () => {
  it('has a factory for every public policy name and rejects unknown ones', () => {
    expect(Object.keys(POLICIES).sort()).toEqual([
      'adakv',
      'arkvale',
      'audiokv',
      'full',
      'h2o',
      'quest',
      'snapkv',
      'streaming',
      'wnw',
    ]);
    expect(createPolicy('snapkv', { budget: 0.2 }).name).toBe('snapkv');
    expect(() => createPolicy('nope', { budget: 0.2 })).toThrow(/unknown policy/);
    expect(() => createPolicy('snapkv', { budget: 0 })).toThrow(/budget/);
    expect(() => createPolicy('snapkv', { budget: 0.2, window: 'x' })).toThrow(/window/);
  });

  it('rejects an option the policy does not read, naming the ones it does', () => {
    expect(() => createPolicy('snapkv', { budget: 0.2, windw: 32 })).toThrow(
      /policy "snapkv" has no option "windw"; its options are window, kernel, pooling/,
    );
    expect(() => createPolicy('full', { budget: 1, window: 32 })).toThrow(/takes no options/);
    expect(createPolicy('snapkv', { budget: 0.2, window: 16 }).name).toBe('snapkv');
    for (const C of Object.values(POLICIES)) expect(Array.isArray(C.options)).toBe(true);
  });
});
