/**
 * The KV heads whose decode attention dates the words: a policy's own anchors where it
 * triages heads (an ablation may have changed them), else the calibrated anchors for the
 * budget, so word timings come from the same heads whichever policy runs.
 */
import type { HeadsFile } from '../model/heads.js';
import type { KvPolicy } from './types.js';
import { assignRoles, budgetKey, headsScore } from './wnw/triage.js';

export function wordTimingHeads(policy: KvPolicy, heads: HeadsFile | undefined, budget: number): number[] {
  if (policy.headRoles) return [...policy.headRoles.anchors];
  if (!heads) return [];
  // Roles are calibrated up to 0.8; a larger budget (the full cache's 1) dates words with 0.8's anchors.
  return [...(heads.roles[budgetKey(budget)] ?? assignRoles(headsScore(heads), Math.min(budget, 0.8))).anchors];
}
