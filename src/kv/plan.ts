/**
 * Plans and observations: the plain data a KV policy and the runtime exchange. The runtime
 * hands a policy attention scores (and, if it asks, keys and queries) as observations; the
 * policy answers with plans, which say where each head's audio KV lives.
 *
 * Heads are KV heads, flattened: head = layer * numKvHeads + kvHead.
 * Positions are audio offsets 0..audioLength-1 (sequence position = audioStart + offset).
 * Text KV (prefix, instruction, generated tokens) is never a policy's business: it always stays.
 */
import type { SummaryFit } from './summary.js';

export interface PolicyLayout {
  numLayers: number;
  numKvHeads: number;
  /** Query heads per KV head. */
  groupSize: number;
  headDim: number;
  /** Number of audio tokens in this transcription. */
  audioLength: number;
  tokensPerSecond: number;
  /** WnW segment length n_s = ceil(2 s * tokensPerSecond). */
  segmentLength: number;
  /** Number of prompt tokens after the audio (the instruction). */
  instructionLength: number;
}

export interface AttentionRequest {
  /** KV heads whose audio attention weights are exported after every decode step. */
  decodeHeads: number[];
  /** Also export each step's post-RoPE query vectors of `decodeHeads` (query-aware page selection). */
  decodeQueries?: boolean;
  /** Export the weights of `decodeHeads` (default true); false when a policy needs only the queries or the chunks. */
  decodeWeights?: boolean;
  /**
   * Reduce the first `heads` of `decodeHeads` to a chunk choice each step, on the device
   * (src/reference/chunk-select.ts): their weights summed per segment (`segmentLength`
   * positions), chunks of `chunkSegments` segments (stride one) ranked by mean, the top
   * `topChunks` kept. The observation's `chunks` carry it, a few indices to read back where
   * the weights are T floats a head.
   */
  decodeChunks?: { heads: number; chunkSegments: number; topChunks: number };
  /**
   * Prefill scores are the softmax weights on audio positions summed over the head's
   * query heads and over the last `prefillQueries` prompt positions
   * (Infinity: every prompt position). WnW uses the instruction length (text-to-audio
   * attention); SnapKV uses its observation window w = 32.
   */
  prefillQueries: number;
  /**
   * More windows (counted as `prefillQueries` is) to score in the same prefill, for a
   * backend that keeps its prefill for the next session on the same embeddings
   * (`reusePrefill`): the next policy then finds its own window there.
   */
  alsoScore?: number[];
  /** Also hand the post-RoPE audio keys of every head to `prefill` (page key bounds). */
  prefillKeys?: boolean;
  /**
   * Keep the post-RoPE queries of the prompt's instruction rows through the prefill, for a
   * placement whose summary slots are fitted to them (`SummaryFitting`); not for the policy.
   */
  instructionQueries?: boolean;
}

/** How the placement makes a plan's summary slots (kv/summary.ts). */
export interface SummaryFitting {
  /**
   * 'mean', or fitted to the queries of the prompt's instruction rows ('value', 'mass'),
   * which the request then keeps (`AttentionRequest.instructionQueries`).
   */
  fit: SummaryFit;
  /** Under 'mass', per layer, the scale of δ in a slot's count (kv/summary.ts `summarise`); 1 when absent. */
  mass?: number[];
}

export interface PrefillObservation {
  layout: PolicyLayout;
  /** Per KV head: Float32Array[audioLength]. */
  scores: Float32Array[];
  /** Per KV head: Float32Array[audioLength * headDim], only when `prefillKeys` was asked. */
  keys?: Float32Array[];
}

/** Where one head's audio positions live after prefill. Both arrays sorted ascending. */
export interface HeadResidency {
  /** Positions kept on the GPU. */
  gpu: Int32Array;
  /** Positions with a CPU copy (recallable). May overlap `gpu` (a full mirror). Positions in neither are dropped. */
  cpu: Int32Array;
  /**
   * Groups of positions not on the GPU, each kept there as one summary slot: the mean of
   * the group's keys and values, attended with a log(group size) bias, so the softmax still
   * sees the mass of what the head does not hold (kv/summary.ts). A group is either dropped
   * (in neither `gpu` nor `cpu`: its slot is fixed for the session) or wholly in `cpu`
   * (recallable: its slot stands for the group while none of it is on the GPU and weighs
   * nothing while any of it is, so a recall never counts a position twice). A summary costs
   * one GPU slot, held for the session either way.
   */
  summaries?: Int32Array[];
}

export interface PrefillPlan {
  /** One entry per KV head. */
  heads: HeadResidency[];
  /** How its summary slots are made; absent: the mean of each group. */
  fitting?: SummaryFitting;
}

/** The prefill scores (and keys) of one layer's KV heads, as soon as that layer's rows have run. */
export interface LayerObservation {
  layout: PolicyLayout;
  layer: number;
  /** Per KV head of this layer (kvHead order): Float32Array[audioLength]. */
  scores: Float32Array[];
  /** Per KV head of this layer: Float32Array[audioLength * headDim], only when `prefillKeys` was asked. */
  keys?: Float32Array[];
}

/**
 * A prefill answered layer by layer: `layer` is called for layers 0, 1, … in order and
 * answers that layer's heads at once, so the runtime can place them before the next
 * layer runs; `finish` after the last layer returns the whole plan and readies the
 * policy for `afterStep`.
 */
export interface LayerPrefill {
  layer(obs: LayerObservation): HeadResidency[];
  finish(): PrefillPlan;
  /** How the summary slots of every layer are made (the plan's `fitting`), known before the first layer. */
  readonly fitting?: SummaryFitting;
}

export interface StepObservation {
  /** 0-based index of the decode step whose attention this is. */
  step: number;
  /**
   * For each head of `AttentionRequest.decodeHeads`, in that order: Float32Array[audioLength]
   * of softmax weights summed over the head's query heads (softmax over all its resident
   * keys, text included); 0 where a position is not on the GPU. Empty when
   * `decodeWeights` is false.
   */
  weights: Float32Array[];
  /** For each requested head: Float32Array[groupSize * headDim], when `decodeQueries` was asked. */
  queries?: Float32Array[];
  /** With `decodeChunks`: the chosen chunks, best first. */
  chunks?: Int32Array;
  /** The chunk heads' weights per segment, where the session reads them for the tide chart. */
  segmentSums?: Float32Array;
}

/** Positions of one head to move. Recall: CPU -> GPU (each needs a CPU copy). Release: leave the GPU. */
export interface Move {
  head: number;
  positions: Int32Array;
}

/** Applied before the next decode step (one-step lag). */
export interface StepPlan {
  recall: Move[];
  release: Move[];
}

export const EMPTY_PLAN: StepPlan = Object.freeze({ recall: [], release: [] }) as StepPlan;
