/**
 * The contract between a KV policy and the runtime. A policy is pure logic over
 * numbers: it sees attention scores (and, if it asks, keys and queries) and answers
 * with plans, which are plain data (kv/plan.ts). It never touches a pool, a buffer or a
 * GPU, so every policy is unit-testable on synthetic attention.
 */
import type {
  AttentionRequest,
  LayerPrefill,
  PolicyLayout,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
} from '../kv/plan.js';
import type { HeadsFile } from '../model/heads.js';

export interface KvPolicy {
  readonly name: string;
  /**
   * For policies that triage heads (wnw): the roles this instance runs with, which an
   * ablation option may have changed from the calibrated ones. Word timings read the
   * anchors, the tide chart the tidal heads.
   */
  readonly headRoles?: { readonly anchors: readonly number[]; readonly tidal: readonly number[] };
  /** What the runtime must export for this policy, for a transcription of this layout. */
  request(layout: PolicyLayout): AttentionRequest;
  prefill(obs: PrefillObservation): PrefillPlan;
  /**
   * Present when every head's prefill selection needs only its own layer's scores (and
   * keys): the runtime then places each layer's KV as soon as that layer has run and
   * never holds every layer's prompt KV at once. A policy whose selection compares heads
   * of different layers leaves it out, and the runtime keeps the whole prompt's KV until
   * `prefill`. Both answer the same plan for the same scores.
   */
  prefillByLayer?(layout: PolicyLayout): LayerPrefill;
  /**
   * A plan applied once, after the prefill's placement and before the first decode step,
   * from what the prefill observed (WnW: the chunks its anchors attended to at the end of
   * the prompt, recalled before the first step rather than a step or two after it).
   */
  afterPrefill?(): StepPlan;
  afterStep(obs: StepObservation): StepPlan;
  /**
   * Present where `afterStep` keeps state between steps (WnW's chunk schedulers, the paged
   * policies' chosen pages): back to that state as it was before the first decode step after
   * the placement (`afterPrefill`'s plan applied). A recording's next request on the same
   * placement calls it, and the runtime puts the KV back where it was at that step
   * (run.ts), so the request decides as the first one did, whatever ran in between. A
   * policy without it has no state a step changes.
   */
  restart?(): void;
  /**
   * The lag a plan of `afterStep` gets: the plan answered from step t's observation takes
   * effect at step t + planLag at the latest. 1 (the default when absent): at step t + 1,
   * so the runtime reads each step back before it queues the next (the GPU idles while the
   * CPU reads, schedules and encodes). 2: the runtime may queue step t + 1 before it reads
   * step t (the token stays on the GPU), and the plan takes effect at step t + 2. A policy
   * whose plans never move anything (prefill-only) takes 2: no lag can change it.
   */
  readonly planLag?: PlanLag;
}

/** Steps between the observed step and the step its plan takes effect at (KvPolicy.planLag). */
export type PlanLag = 1 | 2;

/** The lag a policy's plans get: its own, or 1 (the loop waits for every step). */
export function planLagOf(p: Pick<KvPolicy, 'planLag'>): PlanLag {
  return p.planLag ?? 1;
}

/**
 * Where an evaluation puts a policy's ablation and diagnosis options: a key no plain
 * object (a page's `policyOptions`, JSON, a worker message) can hold, so those runs stay
 * the method's. `registry.forEvaluation` builds it from a policy spec.
 */
export const EVALUATION_OPTIONS: unique symbol = Symbol('evaluation options');

/** Options every policy factory accepts. `budget` is the target r_GPU (audio fraction kept on GPU). */
export interface PolicyOptions {
  budget: number;
  /** Head roles and scores from calibration (needed by wnw, audiokv). */
  heads?: HeadsFile;
  /** Ablations and diagnoses, from an evaluation only (the policy's `evaluationOptions`). */
  [EVALUATION_OPTIONS]?: Readonly<Record<string, unknown>>;
  [key: string]: unknown;
}
