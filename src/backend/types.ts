/**
 * A decoder backend runs the decoder over a paged, per-head KV pool and applies
 * policy plans. Two implementations pass the same conformance tests: `cpu` (plain
 * TypeScript, the numerical reference) and `webgpu` (WGSL kernels).
 */
import type { ModelConfig, PromptIds } from '../model/config.js';
import type { AttentionRequest, LayerPrefill, PrefillObservation, PrefillPlan, StepPlan } from '../kv/plan.js';
import type { Readouts, StepReadings } from './readouts.js';
import type { ResidencyStats, TransferStats } from '../kv/types.js';
import type { ClipSensitivity } from '../calibrate/sensitivity.js';

export type BackendKind = 'cpu' | 'webgpu';

export interface SessionOptions {
  /** Number of audio tokens. */
  audioLength: number;
  /** Upper bound on generated tokens (sizes the text pages). */
  maxNewTokens: number;
  /** What the policy asks of the prefill and of every decode step. */
  request: AttentionRequest;
  /** What each decode step also reads back for the session's other readers, each under its own name. */
  readouts?: Readouts;
  /**
   * The prompt's token ids around the audio (a transcription in another language than the
   * model was loaded with); default: the config's own prompt.
   */
  prompt?: PromptIds;
  /** Also return logits (tests, fixtures); otherwise only the greedy token is produced. */
  returnLogits?: boolean;
  /**
   * The session will close with `close(true)` and another policy will run on the same
   * embeddings: a backend may keep the un-planned prefill for it (the CPU backend does).
   */
  reusePrefill?: boolean;
}

export interface StepResult {
  /** Greedy next token. */
  token: number;
  logits?: Float32Array;
  observation: StepReadings;
}

/**
 * A decoder backend keeps what lives as long as the model: the device, the kernels, the
 * weights. Each transcription opens its own session, whose stages are types: `open` (or
 * `openByLayer`) sizes it and returns the prefill stage; the prefill returns what the
 * placement needs; the placement returns the `DecodeSession`. Nothing can step before the
 * KV is placed, and a whole-prompt session cannot prefill layer by layer. A backend runs
 * one session at a time: opening another closes the one before.
 */
export interface DecoderBackend<S extends DecodeSession = DecodeSession> {
  readonly kind: BackendKind;
  /** Human-readable, e.g. "WebGPU (SwiftShader, a CPU rasteriser)" or "CPU (TypeScript)". */
  readonly label: string;
  readonly config: ModelConfig;
  /**
   * A session whose prefill runs the whole prompt, then places the KV. Throws
   * ContextTooLongError before any GPU work when the prompt or the pool cannot hold it.
   */
  open(options: SessionOptions): WholePrefill<S>;
  /**
   * A session whose prefill places each layer's KV as soon as that layer has run
   * (`LayerPrefill`): the peak is one layer's prompt KV plus the pool.
   */
  openByLayer(options: SessionOptions): LayeredPrefill<S>;
  /**
   * Head triage of one clip with the weights this backend holds (the teacher-forced forward
   * and answer-row backward of src/calibrate/answer-path.ts, which is the reference): `answer` is the
   * transcript's ids and the stop token, forced after `prompt`'s instruction (default the
   * config's). Closes the open session.
   */
  triage(audioEmbeddings: Float32Array, audioLength: number, answer: number[], prompt?: PromptIds): Promise<ClipTriage>;
  /** Frees everything (weights and GPU buffers). */
  dispose(): void;
}

/** One clip's triage: the Voice Score's attention rows and the Head Sensitivity's sums. */
export interface ClipTriage extends ClipSensitivity {
  /** rows[j][layer · numHeads + head]: the audio attention of the row predicting answer[j]. */
  rows: Float32Array[][];
}

/** A session before its prefill: sized, nothing run. */
export interface WholePrefill<S extends DecodeSession = DecodeSession> {
  /** Runs [prefix][audio][instruction] with full attention; audioEmbeddings is [audioLength, hiddenSize]. */
  prefill(audioEmbeddings: Float32Array): Promise<Prefilled<S>>;
  close(): void;
}

/** The prefill run: its first token and what the policy places the KV from. */
export interface Prefilled<S extends DecodeSession = DecodeSession> {
  /** Greedy token after the last prompt position. */
  readonly token: number;
  readonly logits?: Float32Array;
  readonly observation: PrefillObservation;
  /** True when the backend served the prefill it kept from the last session on the same embeddings: no prefill ran. */
  readonly reused?: boolean;
  /** Moves the prefill KV into the pool as the plan says (GPU pages, CPU copies, dropped): the decode session. */
  place(plan: PrefillPlan): Promise<S>;
  close(): void;
}

/** A session whose prefill runs and places one layer at a time. */
export interface LayeredPrefill<S extends DecodeSession = DecodeSession> {
  /**
   * As soon as a layer's rows have run, `run` answers that layer's heads and their KV goes
   * into the pool (kept audio), the CPU store (recallable copies) or nowhere (dropped).
   */
  prefill(audioEmbeddings: Float32Array, run: LayerPrefill): Promise<LayeredPrefillResult<S>>;
  close(): void;
}

export interface LayeredPrefillResult<S extends DecodeSession = DecodeSession> {
  /** Greedy token after the last prompt position. */
  token: number;
  logits?: Float32Array;
  /** The whole plan the layers answered (already applied). */
  plan: PrefillPlan;
  session: S;
}

/**
 * One transcription's decode: its KV placed, its steps queued and read, its policy's plans
 * applied. All its state is its own; `close` frees it and keeps the backend's weights.
 */
export interface DecodeSession {
  /** What the placement moved (bytes to the device and to CPU memory). */
  readonly placed: TransferStats;
  /** Feeds `token` at the next position, appends its KV, returns the next greedy token. */
  step(token: number): Promise<StepResult>;
  /**
   * The pipelined form of `step`: queues a step fed `token`, or with null the greedy token
   * of the step before it (the prefill's for the first), which then never leaves the device.
   * `read` returns the oldest queued step's result; a loop that queues step t + 1 before
   * reading step t keeps the device busy while the CPU reads and schedules (plans then
   * apply one step later: KvPolicy.planLag). `step(t)` is `submit(t)` then `read()`.
   */
  submit(token: number | null): void;
  read(): Promise<StepResult>;
  /** Applies recalls and releases before the next step. */
  apply(plan: StepPlan): Promise<TransferStats>;
  /** The sequence position the next step is fed at. */
  readonly position: number;
  /**
   * Forgets the text from sequence position `position` on (never the audio), once the steps
   * still queued have run (their results are dropped): the next step is fed at `position`,
   * and must be fed a token (no step before it left one on the device). A next request of
   * the same recording forks there: the end of the audio, or of the conversation so far.
   */
  rewind(position: number): Promise<void>;
  residency(): ResidencyStats;
  /** Which slot holds each head's audio positions (tide chart, tests). */
  residencyState(): { slotOf(head: number, audioPos: number): number };
  /** Counters for benchmarks: the work and resources of the last step read. */
  counters(): StepCounters;
  /**
   * Frees the session's state. `keepPrefill` keeps the prefill for a next session on the
   * same embeddings array (evaluation of many policies on one clip); a backend may ignore it.
   */
  close(keepPrefill?: boolean): void;
}

/** Per-step work of the last step read (DecodeSession.counters). */
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
