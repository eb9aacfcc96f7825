/**
 * Budget accounting over plans alone, with no pool: which audio positions of which head
 * are on the GPU or have a CPU copy, after a prefill plan and any number of step plans,
 * applied with the runtime's semantics (src/kv/residency.ts: releases first, then
 * recalls; recalling a resident position or releasing an absent one is a no-op; a recall
 * without a CPU copy is an error). Policies use it to predict r_GPU, tests to check every
 * policy's budget, eval to cross-check `Residency.stats()`.
 */
import type { HeadResidency, PolicyLayout, PrefillPlan, StepPlan } from '../kv/plan.js';

export interface StepCounts {
  /** Positions actually moved CPU → GPU and released from the GPU by one plan. */
  recalled: number;
  released: number;
  /** CPU → GPU bytes: keys and values at f32 (what `Residency.apply` reports for an f32 pool; half with f16). */
  bytesToGpu: number;
}

export class ResidencyTracker {
  private readonly gpu: Uint8Array[];
  private readonly cpu: Uint8Array[];
  private gpuTotal = 0;
  private cpuOnly = 0;

  constructor(
    readonly layout: PolicyLayout,
    plan: PrefillPlan,
  ) {
    const heads = layout.numLayers * layout.numKvHeads;
    const T = layout.audioLength;
    if (plan.heads.length !== heads) throw new Error(`prefill plan has ${plan.heads.length} heads, expected ${heads}`);
    this.gpu = [];
    this.cpu = [];
    for (let h = 0; h < heads; h++) {
      const g = new Uint8Array(T);
      const c = new Uint8Array(T);
      const r: HeadResidency = plan.heads[h];
      checkSorted(r.gpu, T, `head ${h} gpu`);
      checkSorted(r.cpu, T, `head ${h} cpu`);
      for (const p of r.gpu) g[p] = 1;
      for (const p of r.cpu) c[p] = 1;
      // Summary slots are GPU slots of the head's audio (kv/summary.ts): r_GPU counts them.
      this.gpuTotal += r.gpu.length + (r.summaries?.length ?? 0);
      for (let p = 0; p < T; p++) if (c[p] && !g[p]) this.cpuOnly++;
      this.gpu.push(g);
      this.cpu.push(c);
    }
  }

  get heads(): number {
    return this.gpu.length;
  }

  onGpu(head: number, pos: number): boolean {
    return this.gpu[head][pos] === 1;
  }

  hasCpu(head: number, pos: number): boolean {
    return this.cpu[head][pos] === 1;
  }

  gpuCount(head: number): number {
    let n = 0;
    for (const b of this.gpu[head]) n += b;
    return n;
  }

  /** Total audio positions on the GPU over all heads. */
  get gpuPositions(): number {
    return this.gpuTotal;
  }

  /** r_GPU = N_GPU^audio / (heads · T). */
  rGpu(): number {
    return this.gpuTotal / (this.heads * this.layout.audioLength || 1);
  }

  /** r_GPU+CPU: positions on the GPU or recallable from a CPU copy. */
  rGpuCpu(): number {
    return (this.gpuTotal + this.cpuOnly) / (this.heads * this.layout.audioLength || 1);
  }

  /** Applies a step plan as `Residency.apply` does. Throws where the runtime would. */
  apply(plan: StepPlan): StepCounts {
    const T = this.layout.audioLength;
    let released = 0;
    let recalled = 0;
    for (const { head, positions } of plan.release) {
      this.checkHead(head);
      checkSorted(positions, T, `release head ${head}`);
      const g = this.gpu[head];
      const c = this.cpu[head];
      for (const p of positions) {
        if (!g[p]) continue;
        g[p] = 0;
        this.gpuTotal--;
        if (c[p]) this.cpuOnly++;
        released++;
      }
    }
    for (const { head, positions } of plan.recall) {
      this.checkHead(head);
      checkSorted(positions, T, `recall head ${head}`);
      const g = this.gpu[head];
      const c = this.cpu[head];
      for (const p of positions) {
        if (g[p]) continue;
        if (!c[p]) throw new Error(`recall of head ${head} position ${p}, which has no CPU copy`);
        g[p] = 1;
        this.gpuTotal++;
        this.cpuOnly--;
        recalled++;
      }
    }
    return { recalled, released, bytesToGpu: recalled * 8 * this.layout.headDim };
  }

  private checkHead(head: number): void {
    if (!Number.isInteger(head) || head < 0 || head >= this.heads)
      throw new Error(`plan names head ${head}, outside [0, ${this.heads})`);
  }
}

/** r_GPU of a prefill plan. */
export function prefillRGpu(plan: PrefillPlan, audioLength: number): number {
  let n = 0;
  for (const h of plan.heads) n += h.gpu.length + (h.summaries?.length ?? 0);
  return n / (plan.heads.length * audioLength || 1);
}

/** Positions a step plan names (before no-op filtering), for quick per-step counts. */
export function planSize(plan: StepPlan): { recall: number; release: number } {
  let recall = 0;
  let release = 0;
  for (const m of plan.recall) recall += m.positions.length;
  for (const m of plan.release) release += m.positions.length;
  return { recall, release };
}

/** Per-run summary of the per-step numbers every run reports (MB = 10^6 bytes). */
export class RunAccounting {
  private steps = 0;
  private rSum = 0;
  private rPeak = 0;
  private rCpuSum = 0;
  private bytesSum = 0;
  private bytesMax = 0;
  private recalls = 0;
  private releases = 0;

  /** Call once per decode step with the residency that step's attention saw. */
  record(rGpu: number, rGpuCpu: number, counts: StepCounts): void {
    this.steps++;
    this.rSum += rGpu;
    this.rPeak = Math.max(this.rPeak, rGpu);
    this.rCpuSum += rGpuCpu;
    this.bytesSum += counts.bytesToGpu;
    this.bytesMax = Math.max(this.bytesMax, counts.bytesToGpu);
    this.recalls += counts.recalled;
    this.releases += counts.released;
  }

  summary(): {
    steps: number;
    rGpu: number;
    rGpuPeak: number;
    rGpuCpu: number;
    mbPerStep: number;
    mbPerStepMax: number;
    recallsPerStep: number;
    releasesPerStep: number;
  } {
    const n = this.steps || 1;
    return {
      steps: this.steps,
      rGpu: this.rSum / n,
      rGpuPeak: this.rPeak,
      rGpuCpu: this.rCpuSum / n,
      mbPerStep: this.bytesSum / n / 1e6,
      mbPerStepMax: this.bytesMax / 1e6,
      recallsPerStep: this.recalls / n,
      releasesPerStep: this.releases / n,
    };
  }
}

function checkSorted(a: Int32Array, n: number, what: string): void {
  for (let i = 0; i < a.length; i++) {
    if (!(a[i] >= 0 && a[i] < n) || (i > 0 && a[i] <= a[i - 1])) {
      throw new Error(`${what}: positions must be sorted, unique audio offsets in [0, ${n}); got ${a[i]} at ${i}`);
    }
  }
}
