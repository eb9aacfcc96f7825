/**
 * Messages between a page and `worker.ts`. Callbacks cannot cross postMessage, so each
 * becomes a message tagged with the request id; errors cross as plain objects carrying
 * the WnwError `code` and are rebuilt on the page side.
 */
import type {
  Calibration,
  CalibrationClip,
  CalibrationProgress,
  LoadOptions,
  ModelInfo,
  Probe,
  ProgressEvent,
  Recording,
  StepStats,
  TranscribeOptions,
  TranscriptionResult,
} from '../types.js';
import type { LiveOptions, LiveResult, LiveText } from '../transcribe/live.js';

/** Functions and AbortSignals do not cross postMessage: the load's signal becomes a cancel message. */
export type WorkerLoadOptions = Omit<LoadOptions, 'onProgress' | 'signal'>;
/** A probe's data; its hooks are functions, which do not cross postMessage (the client refuses them). */
export type WorkerProbe = Pick<Probe, 'forcedTokens' | 'reusePrefill'>;
/** The page's callbacks become messages; the signal becomes a cancel message. */
export type WorkerTranscribeOptions = Omit<
  TranscribeOptions,
  'signal' | 'onToken' | 'onStep' | 'onProgress' | 'probe'
> & {
  probe?: WorkerProbe;
};
/** A live recording's options: its onText becomes `live-text` messages. */
export type WorkerLiveOptions = Omit<LiveOptions, 'onText' | 'probe'>;
/** What the worker can receive: bytes, a Blob, or 16 kHz mono samples (AudioBuffers do not transfer). */
export type WorkerAudio = ArrayBuffer | Uint8Array | Blob | Float32Array;

export interface SerializedError {
  name: string;
  message: string;
  code?: string;
  /** Extra fields of the typed errors (neededBytes, availableBytes, limit, file, tensor; a cancel's or a lost device's text, phase and reason). */
  fields?: Record<string, string | number>;
}

export type ToWorker =
  | { type: 'load'; id: number; options: WorkerLoadOptions }
  | {
      type: 'transcribe';
      id: number;
      audio: WorkerAudio;
      options: WorkerTranscribeOptions;
      wantSteps: boolean;
      wantTokens: boolean;
    }
  | { type: 'open'; id: number; audio: WorkerAudio; system?: string | null }
  | {
      type: 'request';
      id: number;
      /** The id of the `open` message that opened the recording. */
      recording: number;
      request: WorkerRequest;
      options: WorkerTranscribeOptions;
      wantSteps: boolean;
      wantTokens: boolean;
    }
  | { type: 'close-recording'; id: number; recording: number }
  /** Its id names the live recording: its `live-text` messages carry it, its appends and stop name it as `live`. */
  | { type: 'live-start'; id: number; options: WorkerLiveOptions }
  | { type: 'live-append'; id: number; live: number; samples: Float32Array }
  | { type: 'live-stop'; id: number; live: number }
  /** Runs between the other requests, clip by clip: a cancel stops it between clips. */
  | { type: 'calibrate'; id: number; clips: CalibrationClip[] }
  | { type: 'cancel'; id: number }
  | { type: 'dispose'; id: number };

/** A recording's request, as its method names it (Recording in types.ts). */
export type WorkerRequest =
  | { kind: 'transcribe' }
  | { kind: 'translate'; targetLanguage: string }
  | { kind: 'ask'; question: string; fresh?: boolean }
  | { kind: 'subtitles'; format: 'srt' | 'vtt' };

export type FromWorker =
  | { type: 'progress'; id: number; event: ProgressEvent }
  | { type: 'loaded'; id: number; backend: string; backendReason: string | null; modelInfo: ModelInfo }
  | { type: 'token'; id: number; text: string; token: number }
  | { type: 'step'; id: number; stats: StepStats }
  | { type: 'result'; id: number; result: Omit<TranscriptionResult, 'error'>; error?: SerializedError }
  | { type: 'opened'; id: number; audioSeconds: number; can: Recording['can'] }
  | { type: 'subtitles'; id: number; text: string }
  | { type: 'live-text'; id: number; text: LiveText }
  /** The ticks the append called for have run. */
  | { type: 'live-appended'; id: number }
  /** The live recording stopped: its audio is open as the recording this message's id names, or could not be (`recordingError`). */
  | {
      type: 'live-stopped';
      id: number;
      result: Omit<LiveResult, 'recording' | 'recordingError'>;
      opened: { audioSeconds: number; can: Recording['can'] } | null;
      recordingError?: SerializedError;
    }
  | { type: 'calibrate-progress'; id: number; progress: CalibrationProgress }
  | { type: 'calibrated'; id: number; calibration: Calibration }
  | { type: 'failed'; id: number; error: SerializedError }
  | { type: 'disposed'; id: number };

export function serializeError(e: unknown): SerializedError {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const out: SerializedError = { name: e.name, message: e.message };
  const rec = e as unknown as Record<string, unknown>;
  if (typeof rec.code === 'string') out.code = rec.code;
  const fields: Record<string, string | number> = {};
  for (const k of ['neededBytes', 'availableBytes', 'limit', 'file', 'tensor', 'text', 'phase', 'reason']) {
    const v = rec[k];
    if (typeof v === 'string' || typeof v === 'number') fields[k] = v;
  }
  if (Object.keys(fields).length) out.fields = fields;
  return out;
}
