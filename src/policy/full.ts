/** The full cache: every audio position stays on the GPU; nothing is exported, nothing moves. */
import type { LayerPrefill, PolicyLayout } from '../kv/plan.js';
import { NONE, range } from './select.js';
import { layerwise, PrefillOnlyPolicy } from './layered.js';

export class FullPolicy extends PrefillOnlyPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = [];
  /** Everything stays on the GPU, whatever budget is asked. */
  static readonly fixedBudget = 1;
  readonly name = 'full';
  protected readonly prefillQueries = 1;

  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const all = range(0, layout.audioLength);
    return layerwise(layout, () => Array.from({ length: layout.numKvHeads }, () => ({ gpu: all, cpu: NONE })));
  }
}
