/**
 * `Transcriber.calibrate`: the head triage (src/calibrate/runtime.ts, the answer path) run by
 * a transcriber on its own backend, so the weights it already holds serve both. Each clip is
 * one job in the transcriber's queue: a transcription asked for meanwhile waits for at most
 * the clip under way. In a page, the finished clips are kept in the origin private file
 * system after each one (a stop loses only the clip under way) and the heads beside the
 * cached weights, where the next load of the folder finds them.
 */
import { CancelledError, WnwError } from '../errors.js';
import type { LoadedModel } from '../model/loader.js';
import { headsStoreKey, storeHeads, storedPartial } from '../model/heads-store.js';
import {
  calibrateClips,
  type ClipSource,
  type EncodeAudio,
  type PartialFile,
  type PartialStore,
  type TriageForward,
} from '../calibrate/runtime.js';
import type { CalibrateOptions, Calibration, CalibrationClip } from '../types.js';

export interface CalibrationHost {
  model: LoadedModel;
  encode: EncodeAudio;
  triage: TriageForward;
  /** Runs a job after the transcriber's queued requests. */
  serial<T>(job: () => Promise<T>): Promise<T>;
}

function bad(what: string): never {
  throw new WnwError(
    'BAD_ARGUMENT',
    `${what}: each calibration clip is { id, text, words: [{ word, start, end }], audio } (as calibration-data/ pairs NAME.json with NAME.wav)`,
  );
}

/** Checks the clips' shape before any work, and reads each one's audio when its turn comes. */
export function clipSources(clips: CalibrationClip[]): ClipSource[] {
  if (!Array.isArray(clips) || clips.length === 0) bad('no calibration clips');
  const ids = new Set<string>();
  return clips.map((c, i) => {
    if (!c || typeof c.id !== 'string' || !c.id) bad(`clip ${i} has no id`);
    if (ids.has(c.id)) bad(`two clips are named "${c.id}"`);
    ids.add(c.id);
    if (typeof c.text !== 'string' || !c.text.trim()) bad(`clip "${c.id}" has no text`);
    if (!Array.isArray(c.words) || c.words.some((w) => !(w.end >= w.start && w.start >= 0)))
      bad(`clip "${c.id}" has no word times, or a word ending before it starts`);
    const audio = c.audio;
    if (!(
      typeof audio === 'string' ||
      audio instanceof ArrayBuffer ||
      ArrayBuffer.isView(audio) ||
      audio instanceof Blob
    ))
      bad(`clip "${c.id}" has no audio`);
    const read = async (): Promise<Uint8Array> => {
      if (typeof audio === 'string') {
        const res = await fetch(audio);
        if (!res.ok) throw new WnwError('BAD_ARGUMENT', `calibration clip "${c.id}": ${audio}: HTTP ${res.status}`);
        return new Uint8Array(await res.arrayBuffer());
      }
      if (audio instanceof Blob) return new Uint8Array(await audio.arrayBuffer());
      return audio instanceof ArrayBuffer ? new Uint8Array(audio) : audio;
    };
    return {
      id: c.id,
      text: c.text,
      words: c.words,
      ...(c.tokens ? { tokens: c.tokens } : {}),
      ...(c.seconds ? { seconds: c.seconds } : {}),
      read,
    };
  });
}

/** The browser's keeping of a folder's finished clips, where it can key the folder; else none. */
async function browserStore(base: string): Promise<PartialStore | undefined> {
  const key = await headsStoreKey(base);
  if (!key) return undefined;
  const kept = storedPartial(key);
  return { load: async () => (await kept.load()) as PartialFile | null, save: kept.save, clear: kept.clear };
}

/**
 * Runs the triage and gives the model its heads. `store`: where finished clips are kept
 * (the CLI's file); omitted, the browser's storage where there is one, and the result is
 * stored there too.
 */
export async function calibrateOn(
  host: CalibrationHost,
  clips: CalibrationClip[],
  options: CalibrateOptions = {},
  store?: PartialStore,
): Promise<Calibration> {
  const sources = clipSources(clips);
  const t0 = performance.now();
  const inBrowser = store === undefined;
  const heads = await calibrateClips(host.model, host.encode, sources, {
    estimator: 'answer-path',
    store: store ?? (await browserStore(host.model.base)),
    triage: host.triage,
    schedule: (job) => host.serial(job),
    signal: options.signal,
    onProgress: options.onProgress,
  });
  if (!heads) throw new CancelledError('', 'calibration');
  host.model.heads = heads;
  const stored = inBrowser ? await storeHeads(host.model.base, heads) : false;
  return { heads, stored, seconds: (performance.now() - t0) / 1000 };
}
