/**
 * wnw: long-form speech transcription in the browser (and Node) with a waxing-and-waning
 * KV cache. Start with `loadTranscriber` (or `loadTranscriberInWorker`, which keeps the
 * decoding off the page's thread) and call `transcribe` on what it returns, or `open` a
 * recording once for many requests (transcribe, translate, ask, subtitles).
 *
 * This entry holds what a page needs: loading, transcribing, the typed errors, the "will
 * it fit?" check before a load, `toMono16k` and the user-facing types. Writing a KV policy,
 * the policy registry, the transcriber class and the evaluation hooks live in `wnw/research`
 * (src/research.ts), so this surface stays small (test/unit/package.test.ts holds it to 30 names).
 */
export { loadTranscriber } from './transcribe/transcriber.js';
export { loadTranscriberInWorker } from './worker/client.js';
export type {
  AudioInput,
  LoadOptions,
  PolicyName,
  ProgressEvent,
  Recording,
  RecordingOptions,
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
export { toMono16k } from './audio/decode.js';
// "Will it fit?" before loading, from the model's config and the adapter's limits.
export { checkFit, memoryNeed, type FitVerdict } from './backend/webgpu/fit.js';
export { clearWeightCache } from './model/weight-cache.js';
