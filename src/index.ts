/**
 * wnw: long-form speech transcription in the browser (and Node) with a
 * waxing-and-waning KV cache. Start with `loadTranscriber`.
 */
export { loadTranscriber, WnwTranscriber } from './session/transcriber.js';
export type {
  AudioInput,
  LoadOptions,
  PolicyName,
  ProgressEvent,
  ProgressPhase,
  StepStats,
  TranscribeOptions,
  Transcriber,
  TranscriptionResult,
  TranscriptionStats,
  Word,
} from './types.js';
export {
  WnwError,
  ModelLoadError,
  AudioError,
  ContextTooLongError,
  PositionsExceededError,
  ModelTooBigError,
  NoWebGpuError,
  OutOfMemoryError,
  DeviceLostError,
  CancelledError,
  type WnwErrorCode,
} from './errors.js';
export { POLICIES, hasFixedBudget, needsHeads, policyBudget } from './policy/registry.js';
export { toMono16k } from './audio/decode.js';
export { loadTranscriberInWorker } from './worker/client.js';
export type { KvPolicy } from './policy/types.js';
export type { PolicyLayout, PrefillPlan, StepPlan } from './kv/plan.js';
export type { HeadsFile } from './model/heads.js';
// "Will it fit?" before loading: the decoder's weight bytes per format from a config.
export { decoderWeightBytes, type WeightBytes } from './model/packed-weights.js';
export {
  checkFit,
  memoryNeed,
  weightBindingProblems,
  type DeviceLimits,
  type FitProblem,
  type FitVerdict,
  type MemoryNeed,
  type MemoryNeedRequest,
} from './backend/webgpu/fit.js';
export { clearWeightCache } from './model/weight-cache.js';
export type { WeightFormat } from './model/quant.js';
