/**
 * WnW's ablations and diagnoses: runs that change one piece of the method to measure what
 * it is worth, or keep some heads whole to find where a loss comes from. They reach the
 * policy from an evaluation only (a policy spec such as `wnw:ranking=voice`, carried under
 * EVALUATION_OPTIONS), never from a transcriber's policyOptions, so a run named "wnw" is the
 * method (options.ts). The tables are in docs/wnw-method.md.
 */
import { WnwError } from '../../errors.js';
import type { HeadRanking, HeadRoles, HeadsFile } from '../../model/heads.js';
import { numOpt } from '../select.js';
import { flag, oneOf, type WnwOptions } from './options.js';
import type { AnchorScope } from './recall-groups.js';

/** Ablations: each changes one piece of the method (README's ablation table). */
export const WNW_ABLATIONS: readonly string[] = [
  'ranking',
  'nVoice',
  'anchors',
  'anchorScope',
  'segmentFloor',
  'normalize',
  'scorePower',
  'maxRetention',
  'reserveSegments',
  'tidalSummaries',
  'summaryMass',
  'summaryMassLayer',
];

/** Diagnoses: heads kept whole outside the budget, to find where a loss comes from (docs/wnw-fidelity.md). */
export const WNW_DIAGNOSES: readonly string[] = ['fullLayer', 'fullRole'];

/** Positions per segment every non-anchor head keeps at least, unless `segmentFloor` says otherwise (triage.ts `segmentFloor`). */
export const DEFAULT_SEGMENT_FLOOR = 1;

/** A layer's or a role's heads keep all their audio, outside the budget: the others' room is what it would have been. */
export interface WnwDiagnosis {
  fullLayer?: number;
  fullRole?: 'anchor' | 'tidal' | 'fixed';
}

/** Every field absent or at its neutral value is the method. */
export interface WnwAblations {
  /** The head ranking asked for (absent: the heads file's). */
  ranking?: HeadRanking;
  /** Role counts asked for (absent: the budget's), and anchors spread over the layers. */
  roles: { nVoice?: number; anchors?: number; anchorsPerLayer?: number };
  /** Whose attention directs a tidal head's recall: every anchor's, or its own layer's where it has any (recall-groups.ts). */
  anchorScope: AnchorScope;
  /** Positions per segment every non-anchor head keeps at least, where asked (absent: DEFAULT_SEGMENT_FLOOR). */
  segmentFloor?: number;
  /** Where s̃ is normalised: over all heads ('global', the method's max) or within each layer ('layer'). */
  normalize: 'global' | 'layer';
  /** s̃ raised to this power before λ scales it (1: the method's); below 1 spreads the budget towards low-scored heads. */
  scorePower: number;
  /** The most a non-anchor head keeps (1: the method's); below 1 the budget left flows to the others (triage.ts `retentionFor`). */
  maxRetention: number;
  /** Recall reserve in segments, where asked (absent: what one selection and its lead name). */
  reserveSegments?: number;
  /** Tidal heads also keep a summary slot per group of what they hold in CPU memory, silenced while it is recalled. */
  tidalSummaries: boolean;
  /** Under summaryFit 'mass', the scale of δ in a slot's count (1: the whole gap; 0: as 'value'). */
  summaryMass?: number;
  /** Under summaryFit 'mass', the one layer whose slots get the correction; the others' are as 'value'. */
  summaryMassLayer?: number;
  diagnosis: WnwDiagnosis;
}

/** A number in (0, max], or the default. */
function positive(opts: Readonly<Record<string, unknown>>, key: string, dflt: number, max: number): number {
  const v = opts[key] ?? dflt;
  if (typeof v !== 'number' || !(v > 0 && v <= max))
    throw new WnwError(
      'BAD_ARGUMENT',
      `option "${key}" must be a number above 0${Number.isFinite(max) ? ` and at most ${max}` : ''}, got ${String(v)}`,
    );
  return v;
}

/** The ablations and diagnoses an evaluation asked for (none: the method), checked against the method's options they shape. */
export function parseWnwAblations(
  opts: Readonly<Record<string, unknown>>,
  method: WnwOptions,
  heads: Pick<HeadsFile, 'numLayers' | 'numKvHeads'>,
): WnwAblations {
  const tidalSummaries = flag(opts, 'tidalSummaries', false);
  if (tidalSummaries && !method.summaries)
    throw new WnwError('BAD_ARGUMENT', 'option "tidalSummaries" needs summaries (summaries=true)');
  for (const key of ['summaryMass', 'summaryMassLayer']) {
    if (opts[key] !== undefined && method.summaryFit !== 'mass')
      throw new WnwError(
        'BAD_ARGUMENT',
        `option "${key}" shapes the count of summaryFit "mass", not "${method.summaryFit}"`,
      );
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
    ...(ranking !== undefined ? { ranking } : {}),
    roles: {
      nVoice: opts['nVoice'] === undefined ? undefined : numOpt(opts, 'nVoice', 0, 1),
      anchors: opts['anchors'] === undefined ? undefined : numOpt(opts, 'anchors', 0, 1),
      // Anchors per layer: the roles spread the anchors over the layers, as the recall groups need.
      anchorsPerLayer: anchorScope === 'layer' ? heads.numKvHeads : undefined,
    },
    anchorScope,
    ...(opts['segmentFloor'] !== undefined ? { segmentFloor: numOpt(opts, 'segmentFloor', 1, 0) } : {}),
    normalize: oneOf(opts, 'normalize', ['global', 'layer'] as const, 'global'),
    scorePower: positive(opts, 'scorePower', 1, Infinity),
    maxRetention: positive(opts, 'maxRetention', 1, 1),
    ...(opts['reserveSegments'] !== undefined ? { reserveSegments: numOpt(opts, 'reserveSegments', 0, 0) } : {}),
    tidalSummaries,
    ...(opts['summaryMass'] !== undefined ? { summaryMass: numOpt(opts, 'summaryMass', 1, 0) } : {}),
    ...(summaryMassLayer !== undefined ? { summaryMassLayer } : {}),
    diagnosis: {
      ...(opts['fullLayer'] !== undefined ? { fullLayer: numOpt(opts, 'fullLayer', 0, 0) } : {}),
      ...(fullRole !== undefined ? { fullRole } : {}),
    },
  };
}

/** The ranking a run scores heads by, where it is not the one the heads file was calibrated with. */
export function ownRanking(a: WnwAblations, heads: Pick<HeadsFile, 'ranking'>): HeadRanking | undefined {
  return a.ranking !== undefined && a.ranking !== (heads.ranking ?? 'product') ? a.ranking : undefined;
}

/**
 * Calibrated roles apply unless the run changes what they were made with: the option that
 * does (its roles and retention are then assigned and fitted here), or undefined where
 * they apply. The calibration ranked by the file's ranking, counted the budget's voice
 * heads and anchors over all layers, and fitted λ with the stored selection, the default
 * floor, the global max normalisation, no score power and no cap.
 */
export function calibrationChangedBy(
  stored: Pick<HeadRoles, 'selection'>,
  heads: Pick<HeadsFile, 'ranking'>,
  o: WnwOptions,
  a: WnwAblations,
): string | undefined {
  if (ownRanking(a, heads) !== undefined) return 'ranking';
  if (a.roles.nVoice !== undefined) return 'nVoice';
  if (a.roles.anchors !== undefined) return 'anchors';
  if (a.anchorScope !== 'all') return 'anchorScope';
  if (o.selection !== (stored.selection ?? 'segment')) return 'selection';
  if (a.segmentFloor !== undefined) return 'segmentFloor';
  if (a.normalize !== 'global') return 'normalize';
  if (a.scorePower !== 1) return 'scorePower';
  if (a.maxRetention !== 1) return 'maxRetention';
  return undefined;
}
