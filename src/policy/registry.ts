/**
 * Policy name → factory. Factories take layout-independent options (budget, heads file,
 * per-policy knobs); the layout arrives with `request` / `prefill`. Adding a baseline is
 * one file and one line here.
 */
import { WnwError } from '../errors.js';
import type { KvPolicy, PolicyOptions } from './types.js';
import { FullPolicy } from './full.js';
import { WnwPolicy } from './wnw/policy.js';
import { SnapKVPolicy } from './snapkv.js';
import { AdaKVPolicy } from './adakv.js';
import { AudioKVPolicy } from './audiokv.js';
import { ArkValePolicy } from './arkvale.js';
import { H2OPolicy } from './h2o.js';
import { StreamingPolicy } from './streaming.js';
import { QuestPolicy } from './quest.js';

export type PolicyFactory = (opts: PolicyOptions) => KvPolicy;

/** A policy class: its constructor and the option names it reads. */
interface PolicyClass {
  new (opts: PolicyOptions): KvPolicy;
  readonly options: readonly string[];
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
  if (!c) throw new WnwError('BAD_ARGUMENT', `unknown policy "${name}"; choose one of ${Object.keys(POLICIES).join(', ')}`);
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

/** Policies that need heads.json. */
export const NEEDS_HEADS: ReadonlySet<PolicyName> = new Set<PolicyName>(['wnw', 'audiokv']);

export function createPolicy(name: string, opts: PolicyOptions): KvPolicy {
  const C = policyClass(name);
  checkPolicyOptions(name, opts);
  return new C(opts);
}
