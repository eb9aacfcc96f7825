/**
 * StreamingLLM (Xiao et al. 2023): attention sinks plus a recent window. In our prompt
 * [prefix][audio][instruction] the true first tokens, the prefix (bos and, for a chat
 * model, its template), are text and always stay, so the sinks are the first `sinks`
 * audio positions (default 4, the paper's value) and the window is the last
 * ⌊budget · T⌋ − sinks audio positions. Scores are not used.
 */
import type { LayerPrefill, PolicyLayout } from '../kv/plan.js';
import type { PolicyOptions } from './types.js';
import { checkBudget, headBudget, NONE, numOpt, range, union } from './select.js';
import { layerwise, PrefillOnlyPolicy } from './layered.js';

export class StreamingPolicy extends PrefillOnlyPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['sinks'];
  readonly name = 'streaming';
  protected readonly prefillQueries = 1;
  private readonly budget: number;
  private readonly sinks: number;

  constructor(opts: PolicyOptions) {
    super();
    this.budget = checkBudget(this.name, opts.budget);
    this.sinks = numOpt(opts, 'sinks', 4, 0);
  }

  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const T = layout.audioLength;
    const B = headBudget(this.budget, T);
    const sinks = Math.min(this.sinks, B);
    const keep = union(range(0, sinks), range(T - (B - sinks), T));
    return layerwise(layout, () => Array.from({ length: layout.numKvHeads }, () => ({ gpu: keep, cpu: NONE })));
  }
}
