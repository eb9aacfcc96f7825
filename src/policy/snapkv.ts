/**
 * SnapKV (Li et al. 2024): prompt positions scored by the attention of the last w = 32
 * prompt queries (the observation window), pooled over neighbouring positions, top
 * ⌊budget · T⌋ kept per head; the rest is dropped for good (no recall).
 *
 * The window is the last w rows of [prefix][audio][instruction]: when the instruction is
 * shorter than w, the window reaches into the audio tail. SnapKV always keeps its window,
 * so those audio positions are kept first, inside the same per-head budget.
 * Pooling: kernel 7, average pooling (SnapKV's released code; the method doc says 5–7).
 */
import type { LayerPrefill, PolicyLayout } from '../kv/plan.js';
import type { PolicyOptions } from './types.js';
import { checkBudget, headBudget, NONE, numOpt, pool1d, topK } from './select.js';
import { layerwise, PrefillOnlyPolicy } from './layered.js';

/** Audio positions inside SnapKV's observation window: the last max(0, w − instructionLength). */
export function windowAudio(layout: PolicyLayout, window: number): number {
  return Math.max(0, Math.min(layout.audioLength, window - layout.instructionLength));
}

/** Scores with the window's audio positions forced to the top (kept first), after pooling. */
/** The observation window w by default (SnapKV's paper; AudioKV takes the same). */
export const OBSERVATION_WINDOW = 32;

export function snapScores(
  raw: Float32Array,
  layout: PolicyLayout,
  window: number,
  kernel: number,
  kind: 'avg' | 'max',
): Float32Array {
  const s = pool1d(raw, kernel, kind);
  const T = layout.audioLength;
  for (let p = T - windowAudio(layout, window); p < T; p++) s[p] = Infinity;
  return s;
}

export function poolingOpt(opts: PolicyOptions, dflt: 'avg' | 'max'): 'avg' | 'max' {
  const v = opts['pooling'] ?? dflt;
  if (v !== 'avg' && v !== 'max') throw new RangeError(`option "pooling" must be "avg" or "max", got ${String(v)}`);
  return v;
}

export class SnapKVPolicy extends PrefillOnlyPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['window', 'kernel', 'pooling'];
  readonly name: string;
  protected readonly budget: number;
  protected readonly window: number;
  protected readonly prefillQueries: number;
  protected readonly kernel: number;
  protected readonly pooling: 'avg' | 'max';

  /** `name` and `pooling` are a variant's (Ada-SnapKV: adakv, max pooling). */
  constructor(opts: PolicyOptions, name = 'snapkv', pooling: 'avg' | 'max' = 'avg') {
    super();
    this.name = name;
    this.budget = checkBudget(name, opts.budget);
    this.window = numOpt(opts, 'window', OBSERVATION_WINDOW, 1);
    this.prefillQueries = this.window;
    this.kernel = numOpt(opts, 'kernel', 7, 1);
    this.pooling = poolingOpt(opts, pooling);
  }

  /** Each head ranks its own scores: per layer. */
  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const B = headBudget(this.budget, layout.audioLength);
    return layerwise(layout, (obs) =>
      obs.scores.map((raw) => ({
        gpu: topK(snapScores(raw, layout, this.window, this.kernel, this.pooling), B),
        cpu: NONE,
      })),
    );
  }
}
