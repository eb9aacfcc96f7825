/**
 * Two calibrations of one model side by side: how closely their Head Sensitivities rank the
 * heads (Spearman) and how many heads change role when VS × HS is ranked with either
 * sensitivity (the same Voice Score for both, so only the sensitivity differs).
 */
import { assignRoles, rankingScore } from '../policy/wnw/triage.js';
import type { HeadsFile } from '../model/heads.js';

/** Ranks from 0, ties sharing their mean rank. */
function ranks(a: readonly number[]): number[] {
  const order = a.map((_, i) => i).sort((x, y) => a[x] - a[y]);
  const r = new Array<number>(a.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && a[order[j + 1]] === a[order[i]]) j++;
    for (let k = i; k <= j; k++) r[order[k]] = (i + j) / 2;
    i = j + 1;
  }
  return r;
}

/** Spearman rank correlation: the Pearson correlation of the ranks. */
export function spearman(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length || a.length < 2) throw new Error('spearman needs two lists of one length, at least 2');
  const ra = ranks(a);
  const rb = ranks(b);
  const mean = (ra.length - 1) / 2;
  let sab = 0;
  let saa = 0;
  let sbb = 0;
  for (let i = 0; i < ra.length; i++) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) ** 2;
    sbb += (rb[i] - mean) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}

export interface RoleDifference {
  budget: number;
  /** Heads whose role (anchor, tidal, fixed) differs between the two rankings. */
  differ: number;
  heads: number;
}

/** Per budget, the heads whose role differs when `voiceScore` × each sensitivity ranks them. */
export function roleDifferences(
  voiceScore: number[],
  hsA: number[],
  hsB: number[],
  budgets: number[],
): RoleDifference[] {
  const roleOf = (hs: number[], budget: number) => {
    const r = assignRoles(rankingScore(voiceScore, hs, 'product'), budget);
    const role = new Array<string>(hs.length);
    for (const k of ['anchors', 'tidal', 'fixed'] as const) for (const h of r[k]) role[h] = k;
    return role;
  };
  return budgets.map((budget) => {
    const a = roleOf(hsA, budget);
    const b = roleOf(hsB, budget);
    return { budget, differ: a.filter((x, h) => x !== b[h]).length, heads: a.length };
  });
}

/** A report of `b` against the reference `a`: Spearman of the HS, VS and VS × HS, and role differences with a's VS. */
export function compareCalibrations(a: HeadsFile, b: HeadsFile, budgets = [0.1, 0.2, 0.4]): string[] {
  const product = (h: HeadsFile) => rankingScore(h.voiceScore, h.headSensitivity, 'product');
  const est = (h: HeadsFile) => h.sensitivityEstimator ?? 'gradient';
  return [
    `Spearman over ${a.headSensitivity.length} heads: HS (${est(b)} vs ${est(a)}) ${spearman(a.headSensitivity, b.headSensitivity).toFixed(3)}, ` +
      `VS ${spearman(a.voiceScore, b.voiceScore).toFixed(3)}, VS × HS ${spearman(product(a), product(b)).toFixed(3)}`,
    ...roleDifferences(a.voiceScore, a.headSensitivity, b.headSensitivity, budgets).map(
      (d) => `r_GPU ${d.budget}: ${d.differ} of ${d.heads} heads change role (reference VS × each HS)`,
    ),
  ];
}
