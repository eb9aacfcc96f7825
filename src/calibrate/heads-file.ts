/**
 * From calibration scores to heads.json: rank heads by VS × HS (or one factor, for the
 * ablation), assign roles per target r_GPU, and search λ so that r_GPU measured on the
 * calibration clips' prefill meets the target. The calibration CLI runs the model and
 * feeds these functions; nothing here touches a model.
 */
import type { HeadRanking } from '../model/heads.js';
import { selectByRetention } from '../policy/select.js';
import {
  assignRoles,
  budgetKey,
  fitLambda,
  normalizedScores,
  rankingScore,
  segmentFloor,
  type RoleOptions,
  type Selection,
} from '../policy/wnw/triage.js';
import type { HeadRoles, HeadsFile } from '../model/heads.js';

/** The paper's budgets, plus 0.1 (docs/evaluation.md's tables report WnW there too). */
export const DEFAULT_BUDGETS = [0.1, 0.2, 0.4, 0.6, 0.8];

export interface CalibrationInput extends Pick<
  HeadsFile,
  'model' | 'numLayers' | 'numKvHeads' | 'voiceScore' | 'headSensitivity' | 'sensitivityEstimator' | 'ranking'
> {
  budgets?: number[];
  /** Audio tokens of each calibration clip: the λ search measures r_GPU over these. */
  clipLengths: number[];
  segmentLength: number;
  selection?: Selection;
  roles?: RoleOptions;
  /** Positions per segment every non-anchor head keeps at least (triage.ts `segmentFloor`); default 1, 0 for none. */
  segmentFloor?: number;
}

export function buildHeadsFile(input: CalibrationInput): HeadsFile {
  const N = input.numLayers * input.numKvHeads;
  if (input.voiceScore.length !== N || input.headSensitivity.length !== N) {
    throw new Error(
      `expected ${N} voice scores and head sensitivities, got ${input.voiceScore.length} and ${input.headSensitivity.length}`,
    );
  }
  if (input.clipLengths.length === 0) throw new Error('the λ search needs at least one calibration clip');
  const ranking = input.ranking ?? 'product';
  const selection = input.selection ?? 'segment';
  const score = rankingScore(input.voiceScore, input.headSensitivity, ranking);
  const floor = segmentFloor(input.segmentLength, input.segmentFloor ?? 1);
  const roles: Record<string, HeadRoles> = {};
  for (const budget of input.budgets ?? DEFAULT_BUDGETS) {
    const r = assignRoles(score, budget, input.roles);
    const fit = fitLambda(
      normalizedScores(score, r.anchors),
      r.anchors,
      input.clipLengths,
      budget,
      input.segmentLength,
      { selection, floor },
    );
    roles[budgetKey(budget)] = {
      ...r,
      retention: fit.retention,
      lambda: fit.lambda,
      measuredRGpu: fit.rGpu,
      selection,
      floor: fit.floor,
    };
  }
  return {
    model: input.model,
    numLayers: input.numLayers,
    numKvHeads: input.numKvHeads,
    voiceScore: input.voiceScore,
    headSensitivity: input.headSensitivity,
    ...(input.sensitivityEstimator ? { sensitivityEstimator: input.sensitivityEstimator } : {}),
    ranking,
    score,
    roles,
  };
}

/**
 * r_GPU of one role assignment measured by running the prefill selection on real
 * prefill scores (per clip, per head: Float32Array[T]). The λ search counts analytically;
 * this is the cross-check the CLI reports and the tests compare.
 */
export function measurePrefillRGpu(roles: HeadRoles, segmentLength: number, clips: Float32Array[][]): number {
  const anchors = new Set(roles.anchors);
  let kept = 0;
  let total = 0;
  for (const scores of clips) {
    scores.forEach((s, h) => {
      kept += anchors.has(h)
        ? s.length
        : selectByRetention(s, roles.retention[h], segmentLength, roles.selection ?? 'segment').length;
      total += s.length;
    });
  }
  return kept / (total || 1);
}

/** Head Sensitivity as written by training/: a JSON list per KV head, or an object with `headSensitivity`. */
export function parseHeadSensitivity(json: unknown, numHeads: number): number[] {
  const list = Array.isArray(json) ? json : (json as { headSensitivity?: unknown })?.headSensitivity;
  if (
    !Array.isArray(list) ||
    list.length !== numHeads ||
    !list.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0)
  ) {
    throw new Error(
      `head sensitivity must be a list of ${numHeads} non-negative numbers (one per KV head, flat layer · numKvHeads + head)`,
    );
  }
  return list as number[];
}
