/**
 * WnW's method options, read and checked once: every value the method runs with, its
 * default, and the BAD_ARGUMENT a wrong one gets. These are what a transcriber's
 * policyOptions may set; the ablations and diagnoses are apart (ablations.ts). What each
 * does is said where it acts (policy.ts, recall.ts, chunks.ts, triage.ts, kv/summary.ts)
 * and in docs/wnw-method.md.
 */
import { WnwError } from '../../errors.js';
import type { SummaryFit } from '../../kv/summary.js';
import type { PlanLag, PolicyOptions } from '../types.js';
import { numOpt } from '../select.js';
import { recallOptions, type RecallOptions } from './recall.js';
import type { Selection } from './triage.js';

/** Summary slots fitted to the instruction's queries: chosen on the calibration recordings (docs/wnw-fidelity.md). */
export const DEFAULT_SUMMARY_FIT: SummaryFit = 'mass';

/** The method's options (a transcriber's policyOptions); anything else is an ablation, a diagnosis or a typo. */
export const WNW_OPTIONS: readonly string[] = [
  'chunkSegments',
  'topChunks',
  'recallEvery',
  'delta',
  'lead',
  'planLag',
  'prefillRecall',
  'strictBudget',
  'selection',
  'summaries',
  'summaryLength',
  'summaryFit',
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
  /** Fixed heads keep one summary slot per segment for the positions they drop (kv/summary.ts). */
  summaries: boolean;
  /** Positions a summary slot stands for at most (0: a whole segment). */
  summaryLength: number;
  /** How a summary slot is made (kv/summary.ts): plain mean, or fitted to the instruction's queries. */
  summaryFit: SummaryFit;
}

export function oneOf<T extends string | number>(
  opts: Readonly<Record<string, unknown>>,
  key: string,
  allowed: readonly T[],
  dflt: T,
): T {
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

export function flag(opts: Readonly<Record<string, unknown>>, key: string, dflt: boolean): boolean {
  const v = opts[key] ?? dflt;
  if (typeof v !== 'boolean')
    throw new WnwError('BAD_ARGUMENT', `option "${key}" must be true or false, got ${String(v)}`);
  return v;
}

export function parseWnwOptions(opts: PolicyOptions): WnwOptions {
  const strict = opts['strictBudget'] !== false;
  const recall = recallOptions(opts, strict);
  // Paper mode (strictBudget false) runs the method as written: summaries only when asked.
  const summaries = flag(opts, 'summaries', strict);
  return {
    recall,
    selection: oneOf<Selection>(opts, 'selection', ['segment', 'global'], 'segment'),
    strict,
    lag: oneOf<PlanLag | 'auto'>(opts, 'planLag', [1, 2, 'auto'], 'auto'),
    prefillRecall: flag(opts, 'prefillRecall', true),
    ...(opts['lead'] !== undefined ? { lead: recall.lead } : {}),
    summaries,
    summaryLength: numOpt(opts, 'summaryLength', 0, 0),
    summaryFit: oneOf<SummaryFit>(opts, 'summaryFit', ['mean', 'value', 'mass'], DEFAULT_SUMMARY_FIT),
  };
}
