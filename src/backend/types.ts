/**
 * A decoder backend runs the decoder over a paged, per-head KV pool and applies
 * policy plans. Two implementations pass the same conformance tests: `cpu` (plain
 * TypeScript, the numerical reference) and `webgpu` (WGSL kernels).
 */
import type { ModelConfig } from '../model/config.js';
import type { AttentionRequest, PrefillObservation, PrefillPlan, StepObservation, StepPlan } from '../policy/types.js';
import type { ResidencyStats, TransferStats } from '../kv/types.js';

export type BackendKind = 'cpu' | 'webgpu';

export interface SessionOptions {
  /** Number of audio tokens. */
  audioLength: number;
  /** Upper bound on generated tokens (sizes the text pages). */
  maxNewTokens: number;
  request: AttentionRequest;
  /** Also return logits (tests, fixtures); otherwise only the greedy token is produced. */
  returnLogits?: boolean;
}

export interface PrefillResult {
  /** Greedy token after the last prompt position. */
  token: number;
  logits?: Float32Array;
  observation: PrefillObservation;
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
  /** Runs [bos][audio][instruction] with full attention; audioEmbeddings is [audioLength, hiddenSize]. */
  prefill(audioEmbeddings: Float32Array): Promise<PrefillResult>;
  /** Moves the prefill KV into the pool as the plan says (GPU pages, CPU copies, dropped). */
  applyPrefill(plan: PrefillPlan): Promise<TransferStats>;
  /** Feeds `token` at the next position, appends its KV, returns the next greedy token. */
  step(token: number): Promise<StepResult>;
  /** Applies recalls and releases before the next step. */
  apply(plan: StepPlan): Promise<TransferStats>;
  residency(): ResidencyStats;
  /** Which slot holds each head's audio positions (tide chart, tests); undefined before applyPrefill. */
  residencyState?(): { slotOf(head: number, audioPos: number): number } | undefined;
  /** Counters for benchmarks: dispatches and queue submits of the last step (0 on CPU). */
  stepCounters(): { dispatches: number; submits: number; buffers: number; bindGroups: number };
  /**
   * Ends the session: frees per-session state, keeps the weights. `keepPrefill` keeps
   * the prefill for a next session on the same embeddings array (evaluation of many
   * policies on one clip); a backend may ignore it.
   */
  end(keepPrefill?: boolean): void;
  /** Frees everything (weights and GPU buffers). */
  dispose(): void;
}
