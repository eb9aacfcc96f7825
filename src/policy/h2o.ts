/**
 * H2O (Zhang et al. 2023): heavy hitters by accumulated attention plus a recent window,
 * half of the budget each (the paper's heavy ratio = recent ratio). Accumulated attention
 * is the prompt's: every prompt row's softmax weights summed (prefillQueries = Infinity).
 * H2O evicts only when a new token would overflow the cache; generated tokens are text,
 * outside the audio budget, so after prefill nothing more is evicted: a prefill-only
 * method here, as the method doc groups it.
 */
import type { LayerPrefill, PolicyLayout } from '../kv/plan.js';
import type { PolicyOptions } from './types.js';
import { checkBudget, headBudget, NONE, numOpt, range, topK, union } from './select.js';
import { layerwise, PrefillOnlyPolicy } from './layered.js';

export class H2OPolicy extends PrefillOnlyPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['recentRatio'];
  readonly name = 'h2o';
  protected readonly prefillQueries = Infinity;
  private readonly budget: number;
  private readonly recentRatio: number;

  constructor(opts: PolicyOptions) {
    super();
    this.budget = checkBudget(this.name, opts.budget);
    this.recentRatio = numOpt(opts, 'recentRatio', 0.5, 0);
  }

  /** Each head's heavy hitters are its own: per layer. */
  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const T = layout.audioLength;
    const B = headBudget(this.budget, T);
    const recent = Math.min(B, Math.floor(B * this.recentRatio));
    const older = range(0, T - recent);
    return layerwise(layout, (obs) =>
      obs.scores.map((s) => ({ gpu: union(topK(s, B - recent, older), range(T - recent, T)), cpu: NONE })),
    );
  }
}
