/**
 * Per-layer prefill plumbing shared by the policies: a LayerPrefill built from a
 * selection of one layer's heads, and the whole-prompt `prefill(obs)` run through it, so
 * one selection serves both the per-layer runtime path and the tests and tools that
 * hand a policy every layer's scores at once.
 */
import {
  EMPTY_PLAN,
  type AttentionRequest,
  type HeadResidency,
  type LayerObservation,
  type LayerPrefill,
  type PolicyLayout,
  type PrefillObservation,
  type PrefillPlan,
  type StepPlan,
  type SummaryFitting,
} from '../kv/plan.js';
import type { KvPolicy } from './types.js';

/**
 * A LayerPrefill over `select` (one layer's heads → their residencies). `finish` sees
 * every head's residency (layer-major) once the last layer is in, for a policy's
 * cross-layer bookkeeping that depends on the plan, never on another layer's scores.
 */
export function layerwise(
  layout: PolicyLayout,
  select: (obs: LayerObservation) => HeadResidency[],
  finish: (heads: HeadResidency[]) => void = () => {},
  fitting?: SummaryFitting,
): LayerPrefill {
  const heads: HeadResidency[] = [];
  let next = 0;
  let done = false;
  return {
    ...(fitting ? { fitting } : {}),
    layer(obs) {
      if (done) throw new Error('prefill layer after finish()');
      if (obs.layer !== next) throw new Error(`prefill layer ${obs.layer} out of order: expected layer ${next}`);
      if (obs.scores.length !== layout.numKvHeads)
        throw new Error(`layer ${obs.layer} has ${obs.scores.length} heads' scores, expected ${layout.numKvHeads}`);
      const out = select(obs);
      if (out.length !== layout.numKvHeads)
        throw new Error(`layer ${obs.layer}: ${out.length} residencies for ${layout.numKvHeads} heads`);
      heads.push(...out);
      next++;
      return out;
    },
    finish() {
      if (next !== layout.numLayers) throw new Error(`prefill finished after ${next} of ${layout.numLayers} layers`);
      if (!done) finish(heads);
      done = true;
      return fitting ? { heads, fitting } : { heads };
    },
  };
}

/** The whole prompt's observation, one layer at a time, through the policy's per-layer prefill. */
export function prefillAllLayers(
  policy: { prefillByLayer(layout: PolicyLayout): LayerPrefill },
  obs: PrefillObservation,
): PrefillPlan {
  const { numLayers, numKvHeads } = obs.layout;
  if (obs.scores.length !== numLayers * numKvHeads) {
    throw new Error(
      `prefill observation has ${obs.scores.length} heads' scores, the layout ${numLayers} × ${numKvHeads}`,
    );
  }
  const run = policy.prefillByLayer(obs.layout);
  for (let l = 0; l < numLayers; l++) {
    const at = (a: Float32Array[]) => a.slice(l * numKvHeads, (l + 1) * numKvHeads);
    run.layer({ layout: obs.layout, layer: l, scores: at(obs.scores), keys: obs.keys && at(obs.keys) });
  }
  return run.finish();
}

/**
 * A prefill-only method (the method doc's group: SnapKV, Ada-KV, AudioKV, H2O,
 * StreamingLLM; the full cache too): one selection per layer at prefill from its own
 * layer's scores, nothing asked of decode, nothing recalled.
 */
export abstract class PrefillOnlyPolicy implements KvPolicy {
  abstract readonly name: string;
  /** Prompt rows whose attention the selection reads (AttentionRequest.prefillQueries). */
  protected abstract readonly prefillQueries: number;

  request(_layout: PolicyLayout): AttentionRequest {
    return { decodeHeads: [], prefillQueries: this.prefillQueries };
  }

  prefill(obs: PrefillObservation): PrefillPlan {
    return prefillAllLayers(this, obs);
  }

  abstract prefillByLayer(layout: PolicyLayout): LayerPrefill;

  /** Its step plans are always empty, so the decode loop may run a step ahead of the readback. */
  readonly planLag = 2 as const;

  afterStep(): StepPlan {
    return EMPTY_PLAN;
  }
}
