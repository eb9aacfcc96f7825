/**
 * WnW's options, read and checked once: every value a policy runs with, its default, and
 * the BAD_ARGUMENT a wrong one gets. What each does is said where it acts (policy.ts,
 * recall.ts, chunks.ts, triage.ts, kv/summary.ts).
 */
import { WnwError } from '../../errors.js';
import type { SummaryFit } from '../../kv/summary.js';
import type { HeadsFile } from '../../model/heads.js';
import type { PlanLag, PolicyOptions } from '../types.js';
import { numOpt } from '../select.js';
import { recallOptions, type RecallOptions } from './recall.js';
import type { AnchorScope } from './recall-groups.js';
import type { Selection } from './triage.js';

/** Summary slots fitted to the instruction's queries: chosen on the calibration recordings (docs/wnw-fidelity.md). */
export const DEFAULT_SUMMARY_FIT: SummaryFit = 'mass';

/** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
export const WNW_OPTIONS: readonly string[] = [
  'chunkSegments',
  'topChunks',
  'recallEvery',
  'delta',
  'lead',
  'selection',
  'strictBudget',
  'reserveSegments',
  'ranking',
  'nVoice',
  'anchors',
  'segmentFloor',
  'summaries',
  'summaryLength',
  'summaryFit',
  'summaryMass',
  'summaryMassLayer',
  'tidalSummaries',
  'anchorScope',
  'normalize',
  'scorePower',
  'maxRetention',
  'fullLayer',
  'fullRole',
  'planLag',
  'prefillRecall',
];

export interface WnwOptions {
  /** Chunk length, top-k (a number, or scaled with the clip), δ and lead (recall.ts). */
  recall: RecallOptions;
  selection: Selection;
  strict: boolean;
  /** `planLag` as asked: 1, 2, or 'auto' (the default): decided per clip (policy.ts `decideLag`). */
  lag: PlanLag | 'auto';
  /** Recall, before the first decode step, the chunks the anchors attended to in the prompt's instruction rows (policy.ts `afterPrefill`). */
  prefillRecall: boolean;
  /** `lead` as asked; absent: planLag − 1 segments. */
  lead?: number;
  /** Recall reserve in segments, where an option sets it (else what one selection and its leads name). */
  reserveSegments?: number;
  /** Positions per segment every non-anchor head keeps at least (triage.ts `segmentFloor`). */
  floorPositions: number;
  /** Fixed heads keep one summary slot per segment for the positions they drop (kv/summary.ts). */
  summaries: boolean;
  /** Positions a summary slot stands for at most (0: a whole segment). */
  summaryLength: number;
  /** Tidal heads also keep a summary slot per group of what they hold in CPU memory, silenced while it is recalled. */
  tidalSummaries: boolean;
  /** How a summary slot is made (kv/summary.ts): plain mean, or fitted to the instruction's queries. */
  summaryFit: SummaryFit;
  /** Under 'mass', the scale of δ in a slot's count (1: the whole gap; 0: as 'value'). */
  summaryMass?: number;
  /** Under 'mass', the one layer whose slots get the correction; the others' are as 'value'. */
  summaryMassLayer?: number;
  /** Where s̃ is normalised: over all heads ('global', the method's max) or within each layer ('layer'). */
  normalize: 'global' | 'layer';
  /** s̃ raised to this power before λ scales it (1: the method's); below 1 spreads the budget towards low-scored heads. */
  scorePower: number;
  /** The most a non-anchor head keeps (1: the method's); below 1 the budget left flows to the others (triage.ts `retentionFor`). */
  maxRetention: number;
  /** Whose attention directs a tidal head's recall: every anchor's, or its own layer's where it has any (recall-groups.ts). */
  anchorScope: AnchorScope;
  /** Diagnosis only: a layer (`fullLayer`) or a role (`fullRole`) whose heads keep all their audio, outside the budget. */
  fullLayer?: number;
  fullRole?: 'anchor' | 'tidal' | 'fixed';
  /** The head ranking asked for (absent: the heads file's). */
  ranking?: 'product' | 'voice' | 'sensitivity';
  /** Role counts asked for (absent: the budget's), and anchors spread over the layers. */
  roles: { nVoice?: number; anchors?: number; anchorsPerLayer?: number };
}

function oneOf<T extends string | number>(opts: PolicyOptions, key: string, allowed: readonly T[], dflt: T): T {
  const v = opts[key] ?? dflt;
  if (!allowed.includes(v as T))
    throw new WnwError(
      'BAD_ARGUMENT',
      `option "${key}" must be ${allowed
        .map((a) => (typeof a === 'string' ? `"${a}"` : String(a)))
        .join(', ')
        .replace(/, ([^,]*)$/, ' or $1')}, got ${String(v)}`,
    );
  return v as T;
}

function flag(opts: PolicyOptions, key: string, dflt: boolean): boolean {
  const v = opts[key] ?? dflt;
  if (typeof v !== 'boolean')
    throw new WnwError('BAD_ARGUMENT', `option "${key}" must be true or false, got ${String(v)}`);
  return v;
}

/** A number in (0, max], or the default. */
function positive(opts: PolicyOptions, key: string, dflt: number, max: number): number {
  const v = opts[key] ?? dflt;
  if (typeof v !== 'number' || !(v > 0 && v <= max))
    throw new WnwError(
      'BAD_ARGUMENT',
      `option "${key}" must be a number above 0${Number.isFinite(max) ? ` and at most ${max}` : ''}, got ${String(v)}`,
    );
  return v;
}

export function parseWnwOptions(opts: PolicyOptions, heads: Pick<HeadsFile, 'numLayers' | 'numKvHeads'>): WnwOptions {
  const strict = opts['strictBudget'] !== false;
  const recall = recallOptions(opts, strict);
  // Paper mode (strictBudget false) runs the method as written: summaries only when asked.
  const summaries = flag(opts, 'summaries', strict);
  const tidalSummaries = flag(opts, 'tidalSummaries', false);
  if (tidalSummaries && !summaries)
    throw new WnwError('BAD_ARGUMENT', 'option "tidalSummaries" needs summaries (summaries=true)');
  const summaryFit = oneOf<SummaryFit>(opts, 'summaryFit', ['mean', 'value', 'mass'], DEFAULT_SUMMARY_FIT);
  for (const key of ['summaryMass', 'summaryMassLayer']) {
    if (opts[key] !== undefined && summaryFit !== 'mass')
      throw new WnwError('BAD_ARGUMENT', `option "${key}" shapes the count of summaryFit "mass", not "${summaryFit}"`);
  }
  let summaryMassLayer: number | undefined;
  if (opts['summaryMassLayer'] !== undefined) {
    summaryMassLayer = numOpt(opts, 'summaryMassLayer', 0, 0);
    if (!Number.isInteger(summaryMassLayer) || summaryMassLayer >= heads.numLayers)
      throw new WnwError(
        'BAD_ARGUMENT',
        `option "summaryMassLayer" must be a layer index below ${heads.numLayers}, got ${summaryMassLayer}`,
      );
  }
  const anchorScope = oneOf<AnchorScope>(opts, 'anchorScope', ['all', 'layer'], 'all');
  const fullRole =
    opts['fullRole'] === undefined
      ? undefined
      : oneOf(opts, 'fullRole', ['anchor', 'tidal', 'fixed'] as const, 'anchor');
  const ranking =
    opts['ranking'] === undefined
      ? undefined
      : oneOf(opts, 'ranking', ['product', 'voice', 'sensitivity'] as const, 'product');
  return {
    recall,
    selection: oneOf<Selection>(opts, 'selection', ['segment', 'global'], 'segment'),
    strict,
    lag: oneOf<PlanLag | 'auto'>(opts, 'planLag', [1, 2, 'auto'], 'auto'),
    prefillRecall: flag(opts, 'prefillRecall', true),
    ...(opts['lead'] !== undefined ? { lead: recall.lead } : {}),
    ...(opts['reserveSegments'] !== undefined ? { reserveSegments: numOpt(opts, 'reserveSegments', 0, 0) } : {}),
    floorPositions: numOpt(opts, 'segmentFloor', 1, 0),
    summaries,
    summaryLength: numOpt(opts, 'summaryLength', 0, 0),
    tidalSummaries,
    summaryFit,
    ...(opts['summaryMass'] !== undefined ? { summaryMass: numOpt(opts, 'summaryMass', 1, 0) } : {}),
    ...(summaryMassLayer !== undefined ? { summaryMassLayer } : {}),
    normalize: oneOf(opts, 'normalize', ['global', 'layer'] as const, 'global'),
    scorePower: positive(opts, 'scorePower', 1, Infinity),
    maxRetention: positive(opts, 'maxRetention', 1, 1),
    anchorScope,
    ...(opts['fullLayer'] !== undefined ? { fullLayer: numOpt(opts, 'fullLayer', 0, 0) } : {}),
    ...(fullRole !== undefined ? { fullRole } : {}),
    ...(ranking !== undefined ? { ranking } : {}),
    roles: {
      nVoice: opts['nVoice'] === undefined ? undefined : numOpt(opts, 'nVoice', 0, 1),
      anchors: opts['anchors'] === undefined ? undefined : numOpt(opts, 'anchors', 0, 1),
      // Anchors per layer: the roles spread the anchors over the layers, as the recall groups need.
      anchorsPerLayer: anchorScope === 'layer' ? heads.numKvHeads : undefined,
    },
  };
}
