/**
 * Policy name → factory. Factories take layout-independent options (budget, heads file,
 * per-policy knobs); the layout arrives with `request` / `prefill`. Adding a baseline is
 * one file and one line here.
 */
import { WnwError } from '../errors.js';
import type { PolicyName } from '../types.js';
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

export const POLICIES: Readonly<Record<PolicyName, PolicyFactory>> = {
  full: () => new FullPolicy(),
  wnw: (o) => new WnwPolicy(o),
  snapkv: (o) => new SnapKVPolicy(o),
  adakv: (o) => new AdaKVPolicy(o),
  audiokv: (o) => new AudioKVPolicy(o),
  arkvale: (o) => new ArkValePolicy(o),
  h2o: (o) => new H2OPolicy(o),
  streaming: (o) => new StreamingPolicy(o),
  quest: (o) => new QuestPolicy(o),
};

/** Policies that need heads.json. */
export const NEEDS_HEADS: ReadonlySet<PolicyName> = new Set<PolicyName>(['wnw', 'audiokv']);

export function createPolicy(name: string, opts: PolicyOptions): KvPolicy {
  const f = (POLICIES as Record<string, PolicyFactory>)[name];
  if (!f) throw new WnwError('BAD_ARGUMENT', `unknown policy "${name}"; choose one of ${Object.keys(POLICIES).join(', ')}`);
  return f(opts);
}
