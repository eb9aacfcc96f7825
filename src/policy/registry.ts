/**
 * Policy name → factory. Factories take layout-independent options (budget, heads file,
 * per-policy knobs); the layout arrives with `request` / `prefill`. Adding a baseline is
 * one file and one line here.
 */
import { WnwError } from '../errors.js';
import type { KvPolicy, PolicyOptions } from './types.js';
import type { PolicyLayout } from '../kv/plan.js';
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
 * otherwise run the default and label the run with the misspelt option).
 */
export function checkPolicyOptions(name: string, opts: Record<string, unknown>): void {
  const known = policyClass(name).options;
  for (const key of Object.keys(opts)) {
    if (COMMON_OPTIONS.has(key) || known.includes(key)) continue;
    throw new WnwError(
      'BAD_ARGUMENT',
      known.length
        ? `policy "${name}" has no option "${key}"; its options are ${known.join(', ')}`
        : `policy "${name}" takes no options (got "${key}")`,
    );
  }
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
  return new C(opts);
}
