/** Messages between the page (browser.ts) and the calibration worker (worker.ts). */
import type { SerializedError } from '../worker/protocol.js';
import type { CalibrationProgress } from './runtime.js';
import type { WordSpan } from './voice-score.js';
import type { HeadsFile } from '../research.js';

/** A clip as it crosses: its transcript and word spans, its audio as a URL or a File. */
export interface WireClip {
  id: string;
  text: string;
  words: Array<WordSpan & { word: string }>;
  tokens?: number[];
  audio: string | Blob;
  /** Duration from the set's manifest, where it has one (the expected time weighs clips by it). */
  seconds?: number;
}

export interface CalibrateRequest {
  /** A folder the site serves (absolute URL ending in /), or one picked from disk: its name and Files by path. */
  model: { kind: 'url'; url: string } | { kind: 'picked'; name: string; files: [string, Blob][] };
  clips: WireClip[];
  /** Random directions per KV head (sensitivity.ts M). */
  directions: number;
  /** The clips' language (ISO code), for a prompt that names it. */
  language?: string;
}

export type FromCalibrateWorker =
  | { type: 'status'; text: string }
  | { type: 'progress'; progress: CalibrationProgress }
  | { type: 'done'; heads: HeadsFile; stored: boolean; seconds: number }
  | { type: 'failed'; error: SerializedError };
