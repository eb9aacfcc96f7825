/**
 * How many pool pages a session needs: computed from the prefill plan before any
 * page is touched, so an over-budget plan fails with a typed error up front.
 */
import type { PrefillPlan } from '../policy/types.js';

export interface PoolNeed {
  /** Dense audio pages kept at prefill, all heads. */
  audioPages: number;
  /** Text pages (bos, instruction, generated tokens), all heads. */
  textPages: number;
  /** Room for recalled segments: each recall batch takes fresh pages. */
  recallPages: number;
  total: number;
}

/** Recall headroom per head with recallable positions, in pages (a recall window of a few chunks). */
export const RECALL_PAGES_PER_HEAD = 48;

export function poolNeed(plan: PrefillPlan, pageSize: number, textTokens: number): PoolNeed {
  let audioPages = 0;
  let recallPages = 0;
  for (const { gpu, cpu } of plan.heads) {
    audioPages += Math.ceil(gpu.length / pageSize);
    if (cpu.length > 0) {
      const cpuOnly = countNotIn(cpu, gpu);
      recallPages += Math.min(Math.ceil(cpuOnly / pageSize) + Math.ceil(cpu.length / pageSize), RECALL_PAGES_PER_HEAD);
    }
  }
  const textPages = plan.heads.length * Math.ceil(textTokens / pageSize);
  return { audioPages, textPages, recallPages, total: audioPages + textPages + recallPages };
}

function countNotIn(a: Int32Array, sortedB: Int32Array): number {
  let n = 0;
  let j = 0;
  for (let i = 0; i < a.length; i++) {
    while (j < sortedB.length && sortedB[j] < a[i]) j++;
    if (j >= sortedB.length || sortedB[j] !== a[i]) n++;
  }
  return n;
}
