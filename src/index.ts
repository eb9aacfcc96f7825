/**
 * wnw: long-form speech transcription in the browser (and Node) with a waxing-and-waning
 * KV cache. Start with `loadTranscriber` (or `loadTranscriberInWorker`, which keeps the
 * decoding off the page's thread) and call `transcribe` on what it returns, or `open` a
 * recording once for many requests (transcribe, translate, ask, subtitles).
 *
 * This entry holds everything a page uses: loading (in the page or a worker, one
 * `Transcriber` either way), recordings and their requests, live captions, the typed errors,
 * the "will it fit?" check before a load, `toMono16k` and every type those name. Writing a
 * KV policy, the policy registry, the transcriber class and the evaluation hooks live in
 * `wnw/research` (src/research.ts), for evaluation and policy authors.
 */
export { loadTranscriber } from './transcribe/load.js';
export { loadTranscriberInWorker } from './worker/client.js';
export type {
  AudioInput,
  Calibration,
  CalibrateOptions,
  CalibrationClip,
  CalibrationProgress,
  LiveRecording,
  LoadOptions,
  ModelInfo,
  PolicyName,
  ProgressEvent,
  PromptStats,
  Recording,
  RecordingOptions,
  RequestOptions,
  StepStats,
  TranscribeOptions,
  Transcriber,
  TranscriptionResult,
  TranscriptionStats,
  Word,
} from './types.js';
// Live captions: the options, the committed text as it comes, and the result at stop.
export type { LiveOptions, LiveResult, LiveStats, LiveText, LiveTick } from './transcribe/live.js';
// The load's formats (LoadOptions.kvPrecision, weightFormat).
export type { KvPrecision } from './kv/precision.js';
export type { WeightFormat } from './model/quant.js';
// heads.json, as `Transcriber.calibrate` makes it.
export type { HeadRoles, HeadsFile } from './model/heads.js';
// Branch on `code`; the subclasses carry what a page may show (a cancel's text, the bytes a model needs).
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
// "Will it fit?" before loading: what a model folder holds, and the verdict for a recording on this device.
export { inspectModel, type AudioEncoderSummary, type ModelSummary } from './model/inspect.js';
export { adapterLimits, checkFit, fitDevice, type FitOptions } from './model/fit-check.js';
export { memoryNeed, type DeviceLimits, type FitDevice, type FitVerdict } from './backend/webgpu/fit.js';
// A model folder picked from disk, loaded in this page (its Files are not the worker's).
export { openLocalFolder, localFolderBytes, releaseLocalFolder, type LocalFolder } from './model/local-folder.js';
// Live capture at the microphone's rate to the 16 kHz a live recording takes; a load's progress in words.
export { StreamResampler } from './audio/resample.js';
export { formatBytes, progressNote } from './transcribe/progress-note.js';
export { clearWeightCache } from './model/weight-cache.js';
