/**
 * WnW head triage: from per-head calibration scores to roles (anchor, tidal, fixed) and
 * per-head retention for a target r_GPU. Pure arithmetic, shared by the offline
 * calibration (src/calibrate/) and the runtime policy, so both count r_GPU the same way.
 */
import { WnwError } from '../../errors.js';
import { SENSITIVITY_ESTIMATORS, type HeadRanking, type HeadRoles, type HeadsFile } from '../../model/heads.js';
import { retainedCount } from '../select.js';

export type Selection = 'segment' | 'global';

/**
 * The paper's voice-head counts for Voxtral (240 KV heads): 90 / 50 / 30 / 30 at
 * r_GPU 0.2 / 0.4 / 0.6 / 0.8. We keep their share of all heads (0.375, 0.208, 0.125,
 * 0.125), interpolated linearly between budgets and held flat outside [0.2, 0.8] — at
 * 0.1 the paper's own ablation shows more voice heads helping, so we do not go lower
 * than the 0.2 share. The Qwen counts (27 / 15 / 9 / 9 of 72) are the same shares.
 */
export const PAPER_VOICE_HEADS: ReadonlyArray<readonly [budget: number, share: number]> = [
  [0.2, 90 / 240],
  [0.4, 50 / 240],
  [0.6, 30 / 240],
  [0.8, 30 / 240],
];

export function voiceHeadShare(budget: number): number {
  const t = PAPER_VOICE_HEADS;
  if (budget <= t[0][0]) return t[0][1];
  for (let i = 1; i < t.length; i++) {
    if (budget <= t[i][0]) {
      const f = (budget - t[i - 1][0]) / (t[i][0] - t[i - 1][0]);
      return t[i - 1][1] + f * (t[i][1] - t[i - 1][1]);
    }
  }
  return t[t.length - 1][1];
}

/** n_voice for our head count: round(share · heads), at least 1. */
export function voiceHeadCount(budget: number, numHeads: number): number {
  return Math.max(1, Math.min(numHeads, Math.round(voiceHeadShare(budget) * numHeads)));
}

/**
 * Anchors keep all their audio on the GPU, so on a small model the paper's 5 anchors
 * could exceed the whole budget (5 of our 32 heads are 16 % of the cache) or leave no
 * tidal heads at all (4 voice heads at r_GPU 0.8). We keep the paper's 5 (1–20 anchors
 * moved its WER < 0.3) but cap them at `maxAnchorShare` (0.5) of the budget,
 * ⌊0.5 · budget · heads⌋, and at half the voice heads (the paper's anchors are at most a
 * sixth of its voice heads); at least 1.
 */
export function anchorCount(
  budget: number,
  numHeads: number,
  nVoice: number,
  anchors = 5,
  maxAnchorShare = 0.5,
): number {
  const cap = Math.floor(maxAnchorShare * budget * numHeads + 1e-9);
  return Math.max(1, Math.min(anchors, Math.floor(nVoice / 2), cap));
}

/** The ranking score per head: VS × HS, or one factor alone for the ablation. */
export function rankingScore(
  voiceScore: number[],
  headSensitivity: number[],
  ranking: HeadRanking = 'product',
): number[] {
  if (voiceScore.length !== headSensitivity.length) throw new Error('voiceScore and headSensitivity differ in length');
  return voiceScore.map((vs, i) =>
    ranking === 'voice' ? vs : ranking === 'sensitivity' ? headSensitivity[i] : vs * headSensitivity[i],
  );
}

/** Head indices by score, best first; ties to the lower index. */
export function rankHeads(score: number[]): number[] {
  return score.map((_, i) => i).sort((a, b) => score[b] - score[a] || a - b);
}

export interface Roles {
  anchors: number[];
  tidal: number[];
  fixed: number[];
}

export interface RoleOptions {
  /** Override n_voice (the ablation over the number of voice heads). */
  nVoice?: number;
  anchors?: number;
  maxAnchorShare?: number;
  /**
   * KV heads per layer: spread the anchors over the layers (anchors per layer). The best
   * voice head of each layer that holds two or more voice heads is an anchor first, layers
   * in the order of their best head; the anchors left are taken by rank as usual.
   */
  anchorsPerLayer?: number;
}

/** Top n_voice heads are voice heads, the top anchors of them anchors, the rest tidal; all others fixed. */
export function assignRoles(score: number[], budget: number, opts: RoleOptions = {}): Roles {
  const N = score.length;
  const nVoice = Math.max(1, Math.min(N, opts.nVoice ?? voiceHeadCount(budget, N)));
  const nAnchors = anchorCount(budget, N, nVoice, opts.anchors ?? 5, opts.maxAnchorShare ?? 0.5);
  const order = rankHeads(score);
  const voice = order.slice(0, nVoice);
  const anchors = opts.anchorsPerLayer
    ? spreadAnchors(voice, nAnchors, opts.anchorsPerLayer)
    : voice.slice(0, nAnchors);
  const isAnchor = new Set(anchors);
  const asc = (a: number[]) => a.sort((x, y) => x - y);
  return {
    anchors: asc(anchors),
    tidal: asc(voice.filter((h) => !isAnchor.has(h))),
    fixed: asc(order.slice(nVoice)),
  };
}

/** `nAnchors` of the voice heads (best first): each layer's best where the layer has two or more, then by rank. */
function spreadAnchors(voice: number[], nAnchors: number, layerSize: number): number[] {
  const perLayer = new Map<number, number[]>();
  for (const h of voice)
    perLayer.set(Math.floor(h / layerSize), [...(perLayer.get(Math.floor(h / layerSize)) ?? []), h]);
  const firsts = voice.filter(
    (h) => perLayer.get(Math.floor(h / layerSize))![0] === h && perLayer.get(Math.floor(h / layerSize))!.length >= 2,
  );
  const picked = firsts.slice(0, nAnchors);
  for (const h of voice) if (picked.length < nAnchors && !picked.includes(h)) picked.push(h);
  return picked;
}

/**
 * s̃_i: the ranking score divided by the largest score among non-anchor heads (the
 * method leaves the normalisation open; dividing by the max makes λ = 1 mean "the best
 * non-anchor head keeps everything"). Anchors get 1. With `layerSize` (KV heads per
 * layer) the max is taken within each layer instead, so every layer's best non-anchor
 * head gets 1 and λ shares the budget across layers rather than handing it all to the
 * layer whose scores are largest.
 */
export function normalizedScores(score: number[], anchors: number[], layerSize = score.length): number[] {
  const isAnchor = new Set(anchors);
  const max = new Float64Array(Math.ceil(score.length / layerSize));
  score.forEach((s, i) => {
    if (!isAnchor.has(i)) max[Math.floor(i / layerSize)] = Math.max(max[Math.floor(i / layerSize)], s);
  });
  return score.map((s, i) => {
    const m = max[Math.floor(i / layerSize)];
    return isAnchor.has(i) ? 1 : m > 0 ? Math.max(0, s) / m : 0;
  });
}

/**
 * retention_i = min(max(s̃_i · λ, floor), cap); anchors 1. The floor is the segment floor
 * (see `segmentFloor`); 0 is the method's formula as written. The cap (1 in the method)
 * stops the best-scored heads from keeping everything while λ rises for the rest.
 */
export function retentionFor(sNorm: number[], anchors: number[], lambda: number, floor = 0, cap = 1): number[] {
  const isAnchor = new Set(anchors);
  return sNorm.map((s, i) => (isAnchor.has(i) ? 1 : Math.min(Math.max(cap, floor), Math.max(floor, s * lambda))));
}

/**
 * The method keeps ⌊retention · n_s⌋ positions in every segment "so no stretch of audio is
 * emptied", but a head whose retention is below 1 / n_s keeps ⌊·⌋ = 0 in every segment:
 * nothing of the audio at all. Scores spread over orders of magnitude (VS × HS of a
 * layer the gradient hardly reaches), so with λ scaled for the best heads whole layers
 * fall below it, and a fixed head never gets its audio back. The floor gives every
 * non-anchor head `positions` per segment, paid for out of the same budget (λ shrinks),
 * wherever the budget can hold it (see fitLambda).
 */
export function segmentFloor(segmentLength: number, positions = 1): number {
  return segmentLength > 0 ? Math.min(1, positions / segmentLength) : 0;
}

/** Audio positions kept on the GPU at prefill over all heads, for one clip of T positions. */
export function prefillGpuCount(
  retention: number[],
  T: number,
  segmentLength: number,
  selection: Selection = 'segment',
): number {
  let n = 0;
  for (const r of retention) n += retainedCount(T, r, segmentLength, selection);
  return n;
}

export interface LambdaFit {
  lambda: number;
  retention: number[];
  /** r_GPU over the given clips (Σ kept / Σ heads · T), counting `extra` too. */
  rGpu: number;
  /** The retention floor in force: the one asked for, or the largest whole-position one below it that the budget holds (0: none). */
  floor: number;
}

export interface LambdaFitOptions {
  selection?: Selection;
  /**
   * Positions a head set needs beyond prefill (the runtime's recall reserve); it must not
   * grow with λ faster than the prefill count shrinks, which holds for the reserve (see
   * policy.ts).
   */
  extra?: (retention: number[], T: number) => number;
  /** The segment floor asked for (see `segmentFloor`); 0: none. */
  floor?: number;
  /** The most a non-anchor head keeps (see `retentionFor`); 1: the method's. */
  cap?: number;
}

/**
 * The largest λ whose r_GPU over the clips stays ≤ target, by bisection (r_GPU is a
 * non-decreasing step function of λ). A floor the budget cannot hold even at λ = 0 is
 * lowered one position per segment at a time until it fits; none fitting, the fit is the
 * floorless one, so a tight budget on a short clip behaves as the method's formula does.
 */
export function fitLambda(
  sNorm: number[],
  anchors: number[],
  lengths: number[],
  target: number,
  segmentLength: number,
  { selection = 'segment', extra = () => 0, floor: asked = 0, cap = 1 }: LambdaFitOptions = {},
): LambdaFit {
  const N = sNorm.length;
  const total = lengths.reduce((a, T) => a + N * T, 0) || 1;
  const rAt = (lambda: number, floor: number) => {
    const ret = retentionFor(sNorm, anchors, lambda, floor, cap);
    let n = 0;
    for (const T of lengths) n += prefillGpuCount(ret, T, segmentLength, selection) + extra(ret, T);
    return n / total;
  };
  const fits = (rGpu: number) => rGpu <= target + 1e-12;
  // The most positions per segment, up to the asked floor's, that the budget holds at λ = 0.
  const askedPositions = asked > 0 ? Math.max(1, Math.round(asked * segmentLength)) : 0;
  // The asked floor itself first (exactly as given), then whole positions below it.
  const floorOf = (k: number) => (k === askedPositions ? asked : segmentFloor(segmentLength, k));
  let positions = askedPositions;
  while (positions > 0 && !fits(rAt(0, floorOf(positions)))) positions--;
  const floor = positions > 0 ? floorOf(positions) : 0;
  const r = (lambda: number) => rAt(lambda, floor);
  const isAnchor = new Set(anchors);
  const minPos = Math.min(...sNorm.filter((s, i) => s > 0 && !isAnchor.has(i)), Infinity);
  let hi = Number.isFinite(minPos) ? 1 / minPos : 1;
  let lo = 0;
  if (fits(r(hi))) lo = hi;
  else {
    for (let i = 0; i < 64; i++) {
      const mid = (lo + hi) / 2;
      if (fits(r(mid))) lo = mid;
      else hi = mid;
    }
  }
  return { lambda: lo, retention: retentionFor(sNorm, anchors, lo, floor, cap), rGpu: r(lo), floor };
}

/** The key of `HeadsFile.roles` for a budget: "0.2", "0.15". */
export function budgetKey(budget: number): string {
  return String(Number(budget.toFixed(4)));
}

/** The ranking score of a heads file (stored, or recomputed from VS and HS). */
export function headsScore(heads: HeadsFile): number[] {
  return heads.score ?? rankingScore(heads.voiceScore, heads.headSensitivity, heads.ranking ?? 'product');
}

/** Validates heads.json so a stale or foreign file fails with a message, not a wrong plan. */
export function parseHeadsFile(json: unknown, numLayers?: number, numKvHeads?: number, file = 'heads.json'): HeadsFile {
  const bad = (msg: string): never => {
    throw new WnwError('MODEL_LOAD', `${file}: ${msg}. Re-run npm run calibrate for this model.`);
  };
  if (typeof json !== 'object' || json === null) bad('not a JSON object');
  const h = json as HeadsFile;
  if (!Number.isInteger(h.numLayers) || !Number.isInteger(h.numKvHeads)) bad('numLayers / numKvHeads missing');
  if (numLayers !== undefined && (h.numLayers !== numLayers || h.numKvHeads !== numKvHeads)) {
    bad(`written for ${h.numLayers}×${h.numKvHeads} KV heads, the model has ${numLayers}×${numKvHeads}`);
  }
  const N = h.numLayers * h.numKvHeads;
  const isNums = (a: unknown) =>
    Array.isArray(a) && a.length === N && a.every((x) => typeof x === 'number' && Number.isFinite(x));
  if (!isNums(h.voiceScore) || !isNums(h.headSensitivity))
    bad(`voiceScore and headSensitivity must be ${N} finite numbers`);
  if (h.score !== undefined && !isNums(h.score)) bad(`score must be ${N} finite numbers`);
  if (h.ranking !== undefined && !['product', 'voice', 'sensitivity'].includes(h.ranking))
    bad(`unknown ranking "${String(h.ranking)}"`);
  if (h.sensitivityEstimator !== undefined && !SENSITIVITY_ESTIMATORS.includes(h.sensitivityEstimator))
    bad(`unknown sensitivityEstimator "${String(h.sensitivityEstimator)}"`);
  if (typeof h.roles !== 'object' || h.roles === null) bad('roles missing');
  for (const [key, r] of Object.entries(h.roles)) checkRoles(r, N, (m) => bad(`roles["${key}"]: ${m}`));
  return h;
}

function checkRoles(r: HeadRoles, N: number, bad: (m: string) => never): void {
  const seen = new Uint8Array(N);
  for (const list of [r.anchors, r.tidal, r.fixed]) {
    if (!Array.isArray(list)) bad('anchors, tidal and fixed must be arrays');
    for (const i of list) {
      if (!Number.isInteger(i) || i < 0 || i >= N || seen[i]) bad(`head ${i} is out of range or listed twice`);
      seen[i] = 1;
    }
  }
  if (seen.some((x) => x === 0)) bad('every head needs exactly one role');
  if (!Array.isArray(r.retention) || r.retention.length !== N || r.retention.some((x) => !(x >= 0 && x <= 1)))
    bad(`retention must be ${N} numbers in [0, 1]`);
}
