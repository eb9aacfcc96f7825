/**
 * `wnw calibrate` on files: the clips of a folder (clips.ts), finished clips kept in
 * `OUT.partial.json` beside the output (a re-run with the same settings reuses them and
 * computes only the rest), heads.json written at the end. The calibration itself is
 * runtime.ts, which the demo page runs too.
 */
import { readFileSync, renameSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { LoadedModel } from '../model/loader.js';
import { listCalibrationClips, type FolderClip } from './clips.js';
import {
  calibrateClipSamples,
  calibrateClips,
  type ClipResult,
  type ClipSource,
  type EncodeAudio,
  type PartialFile,
  type PartialStore,
  type SensitivitySettings,
} from './runtime.js';
import type { HeadsFile } from '../model/heads.js';

export type { ClipResult, EncodeAudio };

/** A clip of a folder, its audio read from its file. */
export function fileClip(clip: FolderClip): ClipSource {
  return { ...clip, read: async () => new Uint8Array(readFileSync(clip.wav)) };
}

/** One clip of a folder: its VS share and, with `sensitivity`, the forward-only HS. */
export function calibrateClip(
  model: LoadedModel,
  encode: EncodeAudio,
  clip: FolderClip,
  sensitivity?: SensitivitySettings,
): Promise<ClipResult> {
  return calibrateClipSamples(model, encode, fileClip(clip), sensitivity);
}

/** Finished clips in a JSON file, replaced whole after each clip (written beside and renamed, so a stop never leaves half a file). */
export function fileStore(path: string): PartialStore {
  return {
    load: async () => (existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as PartialFile) : null),
    save: async (p) => {
      writeFileSync(`${path}.tmp`, JSON.stringify(p));
      renameSync(`${path}.tmp`, path);
    },
    clear: async () => rmSync(path, { force: true }),
  };
}

export interface RuntimeCalibration {
  modelDir: string;
  clipsDir: string;
  limit?: number;
  /** heads.json to write; default MODEL/heads.json. */
  out?: string;
  /** The reference-only estimates; default 'finite-difference'. */
  estimator?: 'direct-path' | 'finite-difference';
  /** Random directions per head for the finite-difference estimate; default 4. */
  directions?: number;
  step?: number;
  /** Audio positions perturbed together (sensitivity.ts `blockSize`); default all of a clip's. */
  blockSize?: number;
  /** Progress, one call per clip (reused: taken from the partial file). */
  onClip?: (done: number, total: number, id: string, seconds: number, reused: boolean) => void;
  /** Checked between clips: a stop keeps the partial file for the next run. */
  signal?: AbortSignal;
}

export function partialPath(out: string): string {
  return `${out}.partial.json`;
}

/**
 * Runs the finite-difference (or direct-path) calibration on the CPU reference and writes
 * heads.json (the answer path runs through `Transcriber.calibrate`, on the transcriber's backend).
 * Returns the heads file, or null when stopped by `signal` (the partial file stays).
 */
export async function calibrateRuntime(
  model: LoadedModel,
  encode: EncodeAudio,
  o: RuntimeCalibration,
): Promise<HeadsFile | null> {
  const out = o.out ?? join(o.modelDir, 'heads.json');
  const clips = await listCalibrationClips(o.clipsDir, o.limit);
  // Made before the first clip, not found missing after its minutes of work.
  mkdirSync(dirname(out), { recursive: true });
  const heads = await calibrateClips(model, encode, clips.map(fileClip), {
    estimator: o.estimator ?? 'finite-difference',
    directions: o.directions,
    step: o.step,
    blockSize: o.blockSize,
    store: fileStore(partialPath(out)),
    signal: o.signal,
    onProgress: (p) => p.finished && o.onClip?.(p.clip, p.clips, p.id, p.finished.seconds, p.finished.reused),
  });
  if (heads) writeFileSync(out, JSON.stringify(heads, null, 1) + '\n');
  return heads;
}
