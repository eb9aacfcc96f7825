/**
 * Policy name → factory. Factories take layout-independent options (budget, heads file,
 * per-policy knobs); the layout arrives with `request` / `prefill`. Adding a baseline is
 * one file and one line here.
 */
import { WnwError } from '../errors.js';
import { EVALUATION_OPTIONS, type KvPolicy, type PolicyOptions } from './types.js';
import type { PolicyLayout } from '../kv/plan.js';
import { evaluationOnly } from './select.js';
import { FullPolicy } from './full.js';
import { WnwPolicy } from './wnw/policy.js';
import { OBSERVATION_WINDOW, SnapKVPolicy } from './snapkv.js';
import { AdaKVPolicy } from './adakv.js';
import { AudioKVPolicy } from './audiokv.js';
import { ArkValePolicy } from './arkvale.js';
import { H2OPolicy } from './h2o.js';
import { StreamingPolicy } from './streaming.js';
import { QuestPolicy } from './quest.js';

export type PolicyFactory = (opts: PolicyOptions) => KvPolicy;

/** A policy class: its constructor, the option names it reads and what it means for a run. */
interface PolicyClass {
  new (opts: PolicyOptions): KvPolicy;
  readonly options: readonly string[];
  /** Ablation and diagnosis options: an evaluation's policy spec reaches them (forEvaluation), a transcriber's policyOptions do not. */
  readonly evaluationOptions?: readonly string[];
  /** The budget it runs at whatever is asked (the full cache: 1). */
  readonly fixedBudget?: number;
  /** It triages heads from the calibrated heads.json, so it cannot run without one. */
  readonly needsHeads?: boolean;
}

const CLASSES = {
  full: FullPolicy,
  wnw: WnwPolicy,
  snapkv: SnapKVPolicy,
  adakv: AdaKVPolicy,
  audiokv: AudioKVPolicy,
  arkvale: ArkValePolicy,
  h2o: H2OPolicy,
  streaming: StreamingPolicy,
  quest: QuestPolicy,
} satisfies Record<string, PolicyClass>;

/** The policies' names: the registry's keys. */
export type PolicyName = keyof typeof CLASSES;

export const POLICIES: Readonly<Record<PolicyName, PolicyClass>> = CLASSES;

/** Options every factory takes, whatever the policy. */
const COMMON_OPTIONS = new Set(['budget', 'heads']);

function policyClass(name: string): PolicyClass {
  const c = (POLICIES as Record<string, PolicyClass>)[name];
  if (!c)
    throw new WnwError('BAD_ARGUMENT', `unknown policy "${name}"; choose one of ${Object.keys(POLICIES).join(', ')}`);
  return c;
}

/**
 * A typed error for an option the policy does not read (a typo such as `rankng` would
 * otherwise run the default and label the run with the misspelt option). Scope 'user'
 * (a transcriber's policyOptions) takes the method's options only: an ablation there would
 * run something other than the method under its name. Scope 'evaluation' (a policy spec
 * such as `wnw:ranking=voice`) takes the ablations and diagnoses too.
 */
export function checkPolicyOptions(
  name: string,
  opts: Record<string, unknown>,
  scope: 'user' | 'evaluation' = 'user',
): void {
  const c = policyClass(name);
  const evaluation = c.evaluationOptions ?? [];
  const known = scope === 'evaluation' ? [...c.options, ...evaluation] : c.options;
  for (const key of Object.keys(opts)) {
    if (COMMON_OPTIONS.has(key) || known.includes(key)) continue;
    if (evaluation.includes(key)) throw evaluationOnly(name, key, c.options);
    throw new WnwError(
      'BAD_ARGUMENT',
      known.length
        ? `policy "${name}" has no option "${key}"; its options are ${known.join(', ')}`
        : `policy "${name}" takes no options (got "${key}")`,
    );
  }
}

/**
 * A policy spec's options as a transcriber's policyOptions: the method's as they are, the
 * ablations and diagnoses under EVALUATION_OPTIONS, where a plain object cannot put them.
 */
export function forEvaluation(
  name: string,
  opts: Record<string, string | number | boolean>,
): Record<string, string | number | boolean> {
  checkPolicyOptions(name, opts, 'evaluation');
  const evaluation = policyClass(name).evaluationOptions ?? [];
  const method: Record<string, string | number | boolean> = {};
  const variant: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(opts)) (evaluation.includes(k) ? variant : method)[k] = v;
  return Object.keys(variant).length ? Object.assign(method, { [EVALUATION_OPTIONS]: variant }) : method;
}

/** The budget `name` runs at when `budget` is asked: its own where it has a fixed one (the full cache keeps everything). */
export function policyBudget(name: string, budget: number): number {
  return policyClass(name).fixedBudget ?? budget;
}

/** Whether `name` runs at one budget whatever is asked, so a budget control means nothing for it. */
export function hasFixedBudget(name: string): boolean {
  return policyClass(name).fixedBudget !== undefined;
}

/** Whether `name` needs the calibrated heads.json. */
export function needsHeads(name: string): boolean {
  return policyClass(name).needsHeads === true;
}

/**
 * The prefill-score windows a prefill kept for the next policy on the clip
 * (AttentionRequest.alsoScore) scores beside the running policy's own: the default
 * observation window (SnapKV, Ada-KV, AudioKV), every row (H2O) and the instruction (WnW),
 * so the policies an evaluation runs on one clip share one prefill.
 */
export function sharedPrefillWindows(layout: PolicyLayout): number[] {
  return [OBSERVATION_WINDOW, Infinity, layout.instructionLength];
}

export function createPolicy(name: string, opts: PolicyOptions): KvPolicy {
  const C = policyClass(name);
  checkPolicyOptions(name, opts);
  const variant = opts[EVALUATION_OPTIONS];
  if (variant) {
    const evaluation = C.evaluationOptions ?? [];
    const key = Object.keys(variant).find((k) => !evaluation.includes(k));
    if (key !== undefined)
      throw new WnwError(
        'BAD_ARGUMENT',
        `policy "${name}" has no ablation or diagnosis "${key}"${evaluation.length ? `; its ablations and diagnoses are ${evaluation.join(', ')}` : ''}`,
      );
  }
  return new C(opts);
}
