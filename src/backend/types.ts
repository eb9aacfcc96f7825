/**
 * A decoder backend runs the decoder over a paged, per-head KV pool and applies
 * policy plans. Two implementations pass the same conformance tests: `cpu` (plain
 * TypeScript, the numerical reference) and `webgpu` (WGSL kernels).
 */
import type { ModelConfig, PromptIds } from '../model/config.js';
import type {
  AttentionRequest,
  LayerPrefill,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
} from '../kv/plan.js';
import type { ResidencyStats, TransferStats } from '../kv/types.js';

export type BackendKind = 'cpu' | 'webgpu';

export interface SessionOptions {
  /** Number of audio tokens. */
  audioLength: number;
  /** Upper bound on generated tokens (sizes the text pages). */
  maxNewTokens: number;
  request: AttentionRequest;
  /**
   * The prompt's token ids around the audio (a transcription in another language than the
   * model was loaded with); default: the config's own prompt.
   */
  prompt?: PromptIds;
  /** Also return logits (tests, fixtures); otherwise only the greedy token is produced. */
  returnLogits?: boolean;
  /**
   * The prefill will be `prefillByLayer`: the prompt's K/V is held one layer at a time
   * (the WebGPU backend sizes its prefill buffers for one layer at begin()).
   */
  layered?: boolean;
  /**
   * The session will end with `end(true)` and another policy will run on the same
   * embeddings: a backend may keep the un-planned prefill for it (the CPU backend does).
   */
  reusePrefill?: boolean;
}

export interface PrefillResult {
  /** Greedy token after the last prompt position. */
  token: number;
  logits?: Float32Array;
  observation: PrefillObservation;
  /** True when the backend served the prefill it kept from the last session on the same embeddings (`end(true)`): no prefill ran. */
  reused?: boolean;
}

export interface LayeredPrefillResult {
  /** Greedy token after the last prompt position. */
  token: number;
  logits?: Float32Array;
  /** The whole plan the layers answered (already applied). */
  plan: PrefillPlan;
  transfer: TransferStats;
}

export interface StepResult {
  /** Greedy next token. */
  token: number;
  logits?: Float32Array;
  observation: StepObservation;
}

export interface DecoderBackend {
  readonly kind: BackendKind;
  /** Human-readable, e.g. "WebGPU (SwiftShader, a CPU rasteriser)" or "CPU (TypeScript)". */
  readonly label: string;
  readonly config: ModelConfig;
  /**
   * Sizes the session. Throws ContextTooLongError before any GPU work when the
   * full prompt (for prefill) or the pool cannot hold it.
   */
  begin(options: SessionOptions): void;
  /** Runs [prefix][audio][instruction] with full attention; audioEmbeddings is [audioLength, hiddenSize]. */
  prefill(audioEmbeddings: Float32Array): Promise<PrefillResult>;
  /** Moves the prefill KV into the pool as the plan says (GPU pages, CPU copies, dropped). */
  applyPrefill(plan: PrefillPlan): Promise<TransferStats>;
  /**
   * prefill + applyPrefill, one layer at a time: as soon as a layer's rows have run,
   * `run` answers that layer's heads and their KV goes into the pool (kept audio), the
   * CPU store (recallable copies) or nowhere (dropped), and the layer's prompt K/V
   * buffers serve the next layer. The peak is then one layer's prompt KV plus the pool,
   * not every layer's prompt KV plus the pool. Needs `begin({ layered: true })`.
   */
  prefillByLayer(audioEmbeddings: Float32Array, run: LayerPrefill): Promise<LayeredPrefillResult>;
  /** Feeds `token` at the next position, appends its KV, returns the next greedy token. */
  step(token: number): Promise<StepResult>;
  /**
   * The pipelined form of `step`: queues a step fed `token`, or with null the greedy token
   * of the step queued before it, which then never leaves the device. `readStep` returns the
   * oldest queued step's result; a loop that queues step t + 1 before reading step t keeps
   * the device busy while the CPU reads and schedules (plans then apply one step later:
   * KvPolicy.planLag). `step(t)` is `submitStep(t)` then `readStep()`.
   */
  submitStep?(token: number | null): void;
  readStep?(): Promise<StepResult>;
  /** Applies recalls and releases before the next step. */
  apply(plan: StepPlan): Promise<TransferStats>;
  residency(): ResidencyStats;
  /** Which slot holds each head's audio positions (tide chart, tests); undefined before applyPrefill. */
  residencyState?(): { slotOf(head: number, audioPos: number): number } | undefined;
  /** Counters for benchmarks: dispatches and queue submits of the last step (0 on CPU). */
  /** Per-step work and resources; `poolGrowths`: times the KV pool grew for text or recalls (bind groups are remade then). */
  stepCounters(): StepCounters;
  /**
   * Ends the session: frees per-session state, keeps the weights. `keepPrefill` keeps
   * the prefill for a next session on the same embeddings array (evaluation of many
   * policies on one clip); a backend may ignore it.
   */
  end(keepPrefill?: boolean): void;
  /** Frees everything (weights and GPU buffers). */
  dispose(): void;
}

/** Per-step work of the last step read (stepCounters). */
export interface StepCounters {
  /** Compute dispatches and queue submits of the step (0 on the CPU). */
  dispatches: number;
  submits: number;
  /** Submits of the KV pool's growth (its copy into larger buffers) since the step before: 0 but where it grew. */
  growthSubmits?: number;
  /** Dispatches one decoder layer records (0 on the CPU). */
  dispatchesPerLayer?: number;
  /**
   * Waits on the critical path: readbacks the CPU awaited while no later step was queued
   * on the device (it idled meanwhile). 1 a step for a loop that reads each step before
   * queuing the next; 0 in a pipelined loop's steady state.
   */
  cpuWaits?: number;
  /** Bytes the step copied to the CPU (its readback slot's filled part). */
  readbackBytes?: number;
  /** Bytes written from the CPU to the device for the step: uniforms, token, page tables, recalled rows. */
  bytesToGpu?: number;
  buffers: number;
  bindGroups: number;
  poolGrowths: number;
}
