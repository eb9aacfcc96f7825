/**
 * wnw/research: what evaluating the runtime or writing a KV policy needs beyond the page's
 * entry (src/index.ts). The transcriber class (its `encode` / `decodeEncoded` run many
 * policies over one encoding), the contract a policy implements and the plans it answers
 * with, the policy registry, the evaluation hooks (`TranscribeOptions.probe`), and the
 * sizing helpers behind the fit check, and subtitles (SRT, WebVTT) cut from a result's dated
 * words. The page's names are imported from `wnw` itself.
 */
export { WnwTranscriber, loadTranscriber as loadWnwTranscriber } from './transcribe/transcriber.js';
// A live recording on this thread, over the class's live host.
export { WnwLiveRecording } from './transcribe/live.js';
export type { Probe } from './types.js';
// The fit check's arguments and answer in full (the page's entry has inspectModel, checkFit and memoryNeed).
export type { MemoryNeed, MemoryNeedRequest } from './backend/webgpu/fit.js';
export type { KvPolicy, PlanLag, PolicyOptions } from './policy/types.js';
export type {
  AttentionRequest,
  HeadResidency,
  LayerObservation,
  LayerPrefill,
  Move,
  PolicyLayout,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
} from './kv/plan.js';
export { POLICIES, hasFixedBudget, needsHeads, policyBudget } from './policy/registry.js';
// The fit check's parts: the decoder's weight bytes per format, and which tensors a binding cannot hold.
export { decoderWeightBytes, type WeightBytes } from './model/packed-weights.js';
export { weightBindingProblems, type FitProblem } from './backend/webgpu/fit.js';
// The judge behind wnw's checkFit, on a config (a ModelSummary's) and the load's sizes as they are.
export { checkFit as checkConfigFit } from './backend/webgpu/fit.js';
// Word error rate, as the evaluation scores transcripts.
export { wer } from './eval/wer.js';
// A page's calibration clips for Transcriber.calibrate, and where a folder's heads come from (the demo's "calibrate for WnW").
export { clipsFromFiles, forwardsPerClip, headsState, siteClips } from './calibrate/browser.js';
// Subtitles from a result's dated words (what `wnw transcribe --format srt|vtt` prints).
export { subtitleCues, toSrt, toVtt, type SubtitleCue, type SubtitleOptions } from './transcribe/subtitles.js';
