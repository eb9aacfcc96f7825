/** The full cache: every audio position stays on the GPU; nothing is exported, nothing moves. */
import { EMPTY_PLAN, type AttentionRequest, type KvPolicy, type PolicyLayout, type PrefillObservation, type PrefillPlan, type StepPlan } from './types.js';
import { NONE, range } from './select.js';

export class FullPolicy implements KvPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = [];
  readonly name = 'full';

  request(_layout: PolicyLayout): AttentionRequest {
    return { decodeHeads: [], prefillQueries: 1 };
  }

  prefill(obs: PrefillObservation): PrefillPlan {
    const { numLayers, numKvHeads, audioLength } = obs.layout;
    const all = range(0, audioLength);
    return { heads: Array.from({ length: numLayers * numKvHeads }, () => ({ gpu: all, cpu: NONE })) };
  }

  afterStep(): StepPlan {
    return EMPTY_PLAN;
  }
}
