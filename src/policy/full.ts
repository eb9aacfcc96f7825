/** The full cache: every audio position stays on the GPU; nothing is exported, nothing moves. */
import { EMPTY_PLAN, type AttentionRequest, type KvPolicy, type LayerPrefill, type PolicyLayout, type PrefillObservation, type PrefillPlan, type StepPlan } from './types.js';
import { NONE, range } from './select.js';
import { layerwise, prefillAllLayers } from './layered.js';

export class FullPolicy implements KvPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = [];
  readonly name = 'full';

  request(_layout: PolicyLayout): AttentionRequest {
    return { decodeHeads: [], prefillQueries: 1 };
  }

  prefill(obs: PrefillObservation): PrefillPlan {
    return prefillAllLayers(this, obs);
  }

  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const all = range(0, layout.audioLength);
    return layerwise(layout, () => Array.from({ length: layout.numKvHeads }, () => ({ gpu: all, cpu: NONE })));
  }

  afterStep(): StepPlan {
    return EMPTY_PLAN;
  }
}
