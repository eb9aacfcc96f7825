/** The heads file (heads.json): calibrated head scores and the roles assigned per budget. */
/** Which calibration score ranks the heads: VS × HS (the method), or one factor (the ablation). */
export type HeadRanking = 'product' | 'voice' | 'sensitivity';

/**
 * How `headSensitivity` was measured: 'gradient', the exact ‖∂CE/∂K_audio‖ by autograd
 * (training/head_sensitivity.py); 'finite-difference', the runtime's forward-only estimate
 * from random key perturbations (src/calibrate/sensitivity.ts), on a different scale;
 * 'answer-path', the gradient along every path that stays on the answer rows, from one forward
 * and a backward of the answer rows (src/calibrate/answer-path.ts); 'direct-path', the gradient
 * along the direct path to the LM head only, from two forwards a clip
 * (src/calibrate/direct-sensitivity.ts).
 */
export const SENSITIVITY_ESTIMATORS = ['gradient', 'finite-difference', 'answer-path', 'direct-path'] as const;
export type SensitivityEstimator = (typeof SENSITIVITY_ESTIMATORS)[number];

/** heads.json written by `npm run calibrate` next to the model. */
export interface HeadsFile {
  model: string;
  numLayers: number;
  numKvHeads: number;
  /** Per KV head (flat index): Voice Score and Head Sensitivity. */
  voiceScore: number[];
  headSensitivity: number[];
  /** How headSensitivity was measured; absent: 'gradient'. */
  sensitivityEstimator?: SensitivityEstimator;
  /** What `score` is; default 'product'. */
  ranking?: HeadRanking;
  /** Per KV head: the ranking score (VS × HS for 'product'); derived from the two above when absent. */
  score?: number[];
  /** Role assignments per target budget, keyed by `budgetKey(budget)` ("0.2"). */
  roles: Record<string, HeadRoles>;
}

export interface HeadRoles {
  anchors: number[];
  tidal: number[];
  fixed: number[];
  /** Per KV head retention in [0, 1] (anchors 1). */
  retention: number[];
  /** The lambda found by the search, and the r_GPU it measured on the calibration clips. */
  lambda: number;
  measuredRGpu: number;
  /** Prefill selection the search assumed; default 'segment'. */
  selection?: 'segment' | 'global';
  /** The retention floor in force (triage.ts `segmentFloor`); 0 or absent: none. */
  floor?: number;
}

/**
 * What is wrong with a parsed heads.json for a model of `heads` KV heads, or undefined: the
 * scores must be finite numbers, one per head, and every budget's roles must give each head
 * exactly one of anchor, tidal or fixed, since the policies index them without checking.
 */
export function headsFileFault(h: HeadsFile, heads: number): string | undefined {
  const finite = (a: unknown, n: number) =>
    Array.isArray(a) && a.length === n && a.every((x) => typeof x === 'number' && Number.isFinite(x));
  for (const key of ['voiceScore', 'headSensitivity'] as const)
    if (!finite(h[key], heads)) return `"${key}" must hold ${heads} finite numbers, one per KV head`;
  if (h.score !== undefined && !finite(h.score, heads))
    return `"score" must hold ${heads} finite numbers, one per KV head`;
  if (h.sensitivityEstimator !== undefined && !SENSITIVITY_ESTIMATORS.includes(h.sensitivityEstimator))
    return `unknown "sensitivityEstimator" "${String(h.sensitivityEstimator)}"`;
  if (typeof h.roles !== 'object' || h.roles === null || Array.isArray(h.roles))
    return '"roles" must map budgets to head roles';
  for (const [budget, r] of Object.entries(h.roles)) {
    const lists = [r?.anchors, r?.tidal, r?.fixed];
    if (!lists.every((l) => Array.isArray(l) && l.every((x) => Number.isInteger(x) && x >= 0 && x < heads))) {
      return `roles "${budget}": anchors, tidal and fixed must be lists of head indices below ${heads}`;
    }
    const seen = new Set((lists as number[][]).flat());
    if (seen.size !== heads || (lists as number[][]).flat().length !== heads)
      return `roles "${budget}" must give each of the ${heads} KV heads exactly one role`;
    if (!(
      Array.isArray(r.retention) &&
      r.retention.length === heads &&
      r.retention.every((x) => typeof x === 'number' && x >= 0 && x <= 1)
    )) {
      return `roles "${budget}": "retention" must hold ${heads} numbers in [0, 1]`;
    }
  }
  return undefined;
}
