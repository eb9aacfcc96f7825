/** Messages between a queue worker and its transcription threads (transcription-thread.ts). */
import type { BackendChoice } from '../option-values.js';
import type { SerializedError } from '../worker/protocol.js';
import type { RecordingJob } from './job.js';
import type { RecordingDone } from './transcribe-recording.js';

export type ToThread = { type: 'run'; id: string; job: RecordingJob; model: string; backend: BackendChoice };

export type FromThread =
  | { type: 'progress'; id: string; percent: number }
  | { type: 'done'; id: string; done: RecordingDone }
  | { type: 'failed'; id: string; error: SerializedError };
