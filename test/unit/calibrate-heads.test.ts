/** Role assignment, λ search and heads.json: the requested r_GPU is met, variants rank as the ablation needs. */
import { describe, expect, it } from 'vitest';
import { buildHeadsFile, measurePrefillRGpu, parseHeadSensitivity } from '../../src/calibrate/heads-file.js';
import {
  anchorCount,
  assignRoles,
  budgetKey,
  fitLambda,
  normalizedScores,
  parseHeadsFile,
  prefillGpuCount,
  rankingScore,
  retentionFor,
  segmentFloor,
  voiceHeadCount,
} from '../../src/policy/wnw/triage.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { ablate, makeLayout, prefillObservation, rng } from './policy-fixtures.js';
import { tempDir } from '../helpers/temp.js';

describe('voice and anchor head counts', () => {
  it('reproduces the paper at 240 heads (Voxtral) and 72 heads (Qwen), scaled to ours', () => {
    expect([0.2, 0.4, 0.6, 0.8].map((b) => voiceHeadCount(b, 240))).toEqual([90, 50, 30, 30]);
    expect([0.2, 0.4, 0.6, 0.8].map((b) => voiceHeadCount(b, 72))).toEqual([27, 15, 9, 9]);
    expect([0.1, 0.2, 0.3, 0.4, 0.8].map((b) => voiceHeadCount(b, 32))).toEqual([12, 12, 9, 7, 4]);
  });
  it('keeps 5 anchors where the budget allows, fewer on small models at tight budgets', () => {
    expect(anchorCount(0.2, 240, 90)).toBe(5);
    expect(anchorCount(0.2, 32, 12)).toBe(3);
    expect(anchorCount(0.1, 32, 12)).toBe(1);
    expect(anchorCount(0.8, 32, 4)).toBe(2); // half the voice heads stay tidal
  });
});

describe('ranking and roles', () => {
  // Head 0: high VS, low HS. Head 1: high HS, low VS. Head 2: good at both. Heads 3..: weak.
  const vs = [0.9, 0.1, 0.6, 0.2, 0.15, 0.1, 0.05, 0.02];
  const hs = [0.1, 0.9, 0.6, 0.2, 0.1, 0.15, 0.05, 0.02];

  it('VS × HS, VS only, HS only rank differently (the ablation)', () => {
    const top = (ranking: 'product' | 'voice' | 'sensitivity') =>
      assignRoles(rankingScore(vs, hs, ranking), 0.2, { nVoice: 1 }).anchors;
    expect(top('product')).toEqual([2]);
    expect(top('voice')).toEqual([0]);
    expect(top('sensitivity')).toEqual([1]);
  });

  it('top n_voice are voice heads, top anchors of them anchors, the rest tidal, others fixed', () => {
    const r = assignRoles(rankingScore(vs, hs), 0.4, { nVoice: 4, anchors: 1 });
    expect(r).toEqual({ anchors: [2], tidal: [0, 1, 3], fixed: [4, 5, 6, 7] });
  });

  it('normalises by the best non-anchor score; retention = min(s̃ · λ, 1), anchors 1', () => {
    const s = normalizedScores([4, 2, 1, 0], [0]);
    expect(s).toEqual([1, 1, 0.5, 0]);
    expect(retentionFor(s, [0], 1.5)).toEqual([1, 1, 0.75, 0]);
  });

  it('a retention cap holds the best non-anchor heads below 1 (anchors stay whole) and never undercuts the floor', () => {
    const s = normalizedScores([4, 2, 1, 0], [0]);
    expect(retentionFor(s, [0], 1.5, 0, 0.6)).toEqual([1, 0.6, 0.6, 0]);
    expect(retentionFor(s, [0], 1.5, 0.1, 0.6)).toEqual([1, 0.6, 0.6, 0.1]);
    expect(retentionFor(s, [0], 1.5, 0.5, 0.2)).toEqual([1, 0.5, 0.5, 0.5]);
  });
});

describe('λ search', () => {
  const N = 32;
  const r = rng(4);
  const vs = Array.from({ length: N }, () => r());
  const hs = Array.from({ length: N }, () => r());
  const lengths = [310, 640, 1200, 2000];

  it.each([0.1, 0.2, 0.4, 0.6, 0.8])(
    'meets r_GPU %s on the calibration clips: at most the target, within one step of it',
    (budget) => {
      const score = rankingScore(vs, hs);
      const roles = assignRoles(score, budget);
      const sNorm = normalizedScores(score, roles.anchors);
      const fit = fitLambda(sNorm, roles.anchors, lengths, budget, 25);
      expect(fit.rGpu).toBeLessThanOrEqual(budget);
      expect(fit.rGpu).toBeGreaterThan(budget - 0.01);
      // The next λ up crosses the target: λ is the largest that meets it.
      const total = lengths.reduce((a, T) => a + N * T, 0);
      const over =
        lengths.reduce(
          (a, T) => a + prefillGpuCount(retentionFor(sNorm, roles.anchors, fit.lambda * (1 + 1e-6) + 1e-9), T, 25),
          0,
        ) / total;
      expect(over).toBeGreaterThan(budget);
    },
  );

  it('with a cap, λ rises until the budget is met by the heads below it', () => {
    const score = rankingScore(vs, hs);
    const roles = assignRoles(score, 0.4);
    const sNorm = normalizedScores(score, roles.anchors);
    const plain = fitLambda(sNorm, roles.anchors, lengths, 0.4, 25);
    const capped = fitLambda(sNorm, roles.anchors, lengths, 0.4, 25, { cap: 0.5 });
    expect(capped.rGpu).toBeLessThanOrEqual(0.4);
    expect(capped.rGpu).toBeGreaterThan(0.39);
    expect(capped.lambda).toBeGreaterThan(plain.lambda);
    const anchors = new Set(roles.anchors);
    expect(capped.retention.every((r, i) => anchors.has(i) || r <= 0.5)).toBe(true);
    expect(plain.retention.some((r, i) => !anchors.has(i) && r > 0.5)).toBe(true);
  });

  it('heads.json: roles per budget, measured r_GPU equals the selection run on real prefill scores', () => {
    const layout = makeLayout(8, 4, 640);
    const heads = buildHeadsFile({
      model: 'synthetic',
      numLayers: 8,
      numKvHeads: 4,
      voiceScore: vs,
      headSensitivity: hs,
      clipLengths: [640],
      segmentLength: 25,
    });
    expect(Object.keys(heads.roles)).toEqual(['0.1', '0.2', '0.4', '0.6', '0.8']);
    const clips = [prefillObservation(layout, 1).scores, prefillObservation(layout, 2).scores];
    for (const [key, roles] of Object.entries(heads.roles)) {
      expect(roles.anchors.length + roles.tidal.length + roles.fixed.length).toBe(N);
      expect(roles.measuredRGpu).toBeLessThanOrEqual(Number(key));
      expect(measurePrefillRGpu(roles, 25, clips)).toBeCloseTo(roles.measuredRGpu, 12);
      // The runtime policy in paper mode keeps exactly what calibration measured.
      const p = new WnwPolicy({ budget: Number(key), heads, strictBudget: false });
      p.prefill(prefillObservation(layout, 3));
      expect(p.state!.prefillRGpu).toBeCloseTo(roles.measuredRGpu, 12);
    }
    const back = parseHeadsFile(JSON.parse(JSON.stringify(heads)), 8, 4);
    expect(back.roles[budgetKey(0.2)].retention).toEqual(heads.roles['0.2'].retention);
  });

  it('the global-selection variant is searched with its own count', () => {
    const heads = buildHeadsFile({
      model: 'g',
      numLayers: 8,
      numKvHeads: 4,
      voiceScore: vs,
      headSensitivity: hs,
      clipLengths: [1000],
      segmentLength: 25,
      selection: 'global',
      budgets: [0.2],
    });
    expect(heads.roles['0.2'].selection).toBe('global');
    expect(heads.roles['0.2'].measuredRGpu).toBeLessThanOrEqual(0.2);
    expect(heads.roles['0.2'].measuredRGpu).toBeGreaterThan(0.19);
  });
});

describe('heads.json validation', () => {
  const good = buildHeadsFile({
    model: 'm',
    numLayers: 1,
    numKvHeads: 8,
    voiceScore: [1, 2, 3, 4, 5, 6, 7, 8].map((x) => x / 8),
    headSensitivity: Array(8).fill(1),
    clipLengths: [500],
    segmentLength: 25,
    budgets: [0.4],
  });

  it('rejects a file for another model shape or with broken roles', () => {
    expect(() => parseHeadsFile(good, 2, 4)).toThrow(/1×8/);
    const dup = JSON.parse(JSON.stringify(good));
    dup.roles['0.4'].fixed.push(dup.roles['0.4'].anchors[0]);
    expect(() => parseHeadsFile(dup)).toThrow(/twice/);
    expect(() => parseHeadsFile({ ...good, voiceScore: [1] })).toThrow(/voiceScore/);
  });

  it('reads head sensitivity as a list or an object', () => {
    expect(parseHeadSensitivity([1, 2], 2)).toEqual([1, 2]);
    expect(parseHeadSensitivity({ headSensitivity: [1, 2] }, 2)).toEqual([1, 2]);
    expect(() => parseHeadSensitivity([1], 2)).toThrow(/2 non-negative/);
  });
});

describe('listCalibrationClips', () => {
  it('takes NAME.json beside NAME.wav as clips and leaves other json (a manifest) alone', async () => {
    const { writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { listCalibrationClips } = await import('../../src/calibrate/clips.js');
    const d = tempDir('wnw-calib-');
    const clip = { text: 'hello world', words: [{ word: 'hello', start: 0.1, end: 0.4, confidence: 1 }] };
    for (const id of ['b', 'a']) {
      writeFileSync(join(d, `${id}.json`), JSON.stringify(clip));
      writeFileSync(join(d, `${id}.wav`), '');
    }
    writeFileSync(join(d, 'manifest.json'), JSON.stringify([{ id: 'a' }]));
    const clips = await listCalibrationClips(d);
    expect(clips.map((c) => c.id)).toEqual(['a', 'b']);
    expect((await listCalibrationClips(d, 1)).length).toBe(1);
    writeFileSync(join(d, 'c.json'), '{"text": 1}');
    writeFileSync(join(d, 'c.wav'), '');
    await expect(listCalibrationClips(d)).rejects.toThrow(/c\.json: expected/);
  });
});

describe('segment floor', () => {
  // One layer of strong voice heads, three whose scores are 10–100× lower (as VS × HS
  // comes out on the shipped model: the gradient hardly reaches some layers).
  const L = 4;
  const K = 8;
  const N = L * K;
  const r = rng(9);
  const score = Array.from({ length: N }, (_, h) => (Math.floor(h / K) === 2 ? 0.5 + 0.5 * r() : 0.002 + 0.02 * r()));
  const T = 3000;
  const n = 25;
  const segments = Math.ceil(T / n);
  const kept = (retention: number) => prefillGpuCount([retention], T, n);

  it('without it, ⌊retention · n_s⌋ leaves low-scored heads no audio at all; with it, every head keeps a position per segment', () => {
    const roles = assignRoles(score, 0.2);
    const sNorm = normalizedScores(score, roles.anchors);
    const plain = fitLambda(sNorm, roles.anchors, [T], 0.2, n);
    expect(roles.fixed.filter((h) => kept(plain.retention[h]) === 0).length).toBeGreaterThan(0);
    const floored = fitLambda(sNorm, roles.anchors, [T], 0.2, n, { floor: segmentFloor(n) });
    expect(floored.floor).toBe(1 / n);
    expect(floored.rGpu).toBeLessThanOrEqual(0.2);
    for (const h of [...roles.tidal, ...roles.fixed])
      expect(kept(floored.retention[h])).toBeGreaterThanOrEqual(segments);
    // Paid for by the best heads: λ shrinks.
    expect(floored.lambda).toBeLessThan(plain.lambda);
  });

  it('is lowered to the most positions per segment the budget holds, and dropped where it holds none', () => {
    const roles = assignRoles(score, 0.1);
    const sNorm = normalizedScores(score, roles.anchors);
    const rAtZero = (k: number) =>
      prefillGpuCount(retentionFor(sNorm, roles.anchors, 0, segmentFloor(n, k)), T, n) / (N * T);
    // 0.1 of the cache, of which a floor of 8 alone would take 1/3 of every non-anchor head.
    expect(rAtZero(8)).toBeGreaterThan(0.1);
    const fit = fitLambda(sNorm, roles.anchors, [T], 0.1, n, { floor: segmentFloor(n, 8) });
    const k = Math.round(fit.floor * n);
    expect(k).toBeGreaterThanOrEqual(1);
    expect(k).toBeLessThan(8);
    expect(fit.floor).toBe(segmentFloor(n, k));
    expect(rAtZero(k)).toBeLessThanOrEqual(0.1);
    expect(rAtZero(k + 1)).toBeGreaterThan(0.1);
    expect(fit.rGpu).toBeLessThanOrEqual(0.1);
    expect(fit).toEqual(fitLambda(sNorm, roles.anchors, [T], 0.1, n, { floor: segmentFloor(n, k) }));
    // A budget the anchors nearly fill holds no floor at all: the floorless fit.
    const tight = assignRoles(score, 0.04);
    const tNorm = normalizedScores(score, tight.anchors);
    const none = fitLambda(tNorm, tight.anchors, [T], 0.04, n, { floor: segmentFloor(n, 3) });
    expect(none.floor).toBe(0);
    expect(none).toEqual({ ...fitLambda(tNorm, tight.anchors, [T], 0.04, n), floor: 0 });
  });

  it('heads.json and the runtime policy apply it; segmentFloor=0 is the formula as written', () => {
    const layout = makeLayout(L, K, T);
    const heads = buildHeadsFile({
      model: 'floor',
      numLayers: L,
      numKvHeads: K,
      voiceScore: score,
      headSensitivity: score.map(() => 1),
      clipLengths: [T],
      segmentLength: n,
      budgets: [0.2],
    });
    expect(heads.roles['0.2'].floor).toBe(1 / n);
    const emptied = (opts: Record<string, unknown>) => {
      const p = new WnwPolicy({ budget: 0.2, heads, ...opts });
      const plan = p.prefill(prefillObservation(layout, 5));
      expect(p.state!.prefillRGpu).toBeLessThanOrEqual(0.2);
      return plan.heads.filter((hr) => hr.gpu.length === 0).length;
    };
    expect(emptied({})).toBe(0);
    expect(emptied({ strictBudget: false })).toBe(0);
    expect(emptied(ablate({ segmentFloor: 0 }))).toBeGreaterThan(0);
  });
});
