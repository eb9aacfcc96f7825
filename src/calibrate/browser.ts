/**
 * The page side of the calibration worker (worker.ts): which clips to calibrate on (the
 * site's calibration set, chosen as `wnw calibrate --limit N` chooses from a folder, or the
 * user's own WAV + JSON pairs), whether a folder already has heads, and a run that reports
 * progress and can be stopped. Nothing here computes: the worker does.
 */
// From its module, not the entry: the page's bundle carries no engine (main.ts loads it lazily).
import { WnwError } from '../errors.js';
import { exists, joinModelPath } from '../model/files.js';
import { readStoredHeads } from '../model/heads-store.js';
import { localFolderFiles } from '../model/local-folder.js';
import { deserializeError } from '../worker/client.js';
import type { CalibrateRequest, FromCalibrateWorker, WireClip } from './protocol.js';
import { forwardsPerClip } from './cost.js';
import type { CalibrationProgress } from './runtime.js';
import type { HeadsFile } from '../research.js';

export type { CalibrationProgress, WireClip };
export { forwardsPerClip };

/** Where a folder's heads come from: heads.json in it, one stored by an earlier calibration in this browser, or none. */
export async function headsState(base: string): Promise<'folder' | 'stored' | 'none'> {
  if (await exists(joinModelPath(base, 'heads.json'))) return 'folder';
  return (await readStoredHeads(base)) !== null ? 'stored' : 'none';
}

type ClipJson = Pick<WireClip, 'text' | 'words' | 'tokens'>;

function checkClip(json: unknown, name: string): ClipJson {
  const j = json as Partial<ClipJson> | null;
  if (!j || typeof j.text !== 'string' || !Array.isArray(j.words))
    throw new WnwError(
      'BAD_ARGUMENT',
      `${name}: a calibration clip's JSON must hold { "text", "words": [{ "word", "start", "end" }] }`,
    );
  return { text: j.text, words: j.words, ...(Array.isArray(j.tokens) ? { tokens: j.tokens } : {}) };
}

/** Clip names of the site's calibration set (its manifest.json), sorted, as the CLI sorts a folder's. */
export async function siteClipNames(base: URL): Promise<Array<{ name: string; seconds?: number }>> {
  const res = await fetch(new URL('manifest.json', base));
  if (!res.ok)
    throw new WnwError(
      'BAD_ARGUMENT',
      `the site's calibration set is not there (${new URL('manifest.json', base).href}: HTTP ${res.status})`,
    );
  const list = (await res.json()) as Array<{ name?: unknown; seconds?: unknown }>;
  return list
    .map((x) => ({ name: String(x.name), ...(typeof x.seconds === 'number' ? { seconds: x.seconds } : {}) }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The first `limit` clips of the site's calibration set: transcripts fetched now, audio by URL in the worker. */
export async function siteClips(base: URL, limit: number): Promise<WireClip[]> {
  const names = (await siteClipNames(base)).slice(0, limit);
  return Promise.all(
    names.map(async ({ name: id, seconds }) => {
      const url = new URL(`${id}.json`, base);
      const res = await fetch(url);
      if (!res.ok) throw new WnwError('BAD_ARGUMENT', `${url.href}: HTTP ${res.status}`);
      return {
        id,
        ...checkClip(await res.json(), url.href),
        audio: new URL(`${id}.wav`, base).href,
        ...(seconds ? { seconds } : {}),
      };
    }),
  );
}

/** The user's own clips: NAME.wav beside NAME.json, paired by name (other files are left out). */
export async function clipsFromFiles(files: File[]): Promise<WireClip[]> {
  const wav = new Map(files.filter((f) => /\.wav$/i.test(f.name)).map((f) => [f.name.replace(/\.wav$/i, ''), f]));
  const clips: WireClip[] = [];
  for (const f of files.filter((x) => /\.json$/i.test(x.name)).sort((a, b) => a.name.localeCompare(b.name))) {
    const id = f.name.replace(/\.json$/i, '');
    const audio = wav.get(id);
    if (!audio) continue;
    let json: unknown;
    try {
      json = JSON.parse(await f.text());
    } catch {
      throw new WnwError('BAD_ARGUMENT', `${f.name} is not JSON`);
    }
    clips.push({ id, ...checkClip(json, f.name), audio });
  }
  if (!clips.length)
    throw new WnwError(
      'BAD_ARGUMENT',
      'no calibration clips among the chosen files: each clip is NAME.wav (16 kHz mono) ' +
        'with NAME.json ({ "text", "words": [{ "word", "start", "end" }] }) beside it',
    );
  return clips;
}

export interface CalibrationRun {
  done: Promise<{ heads: HeadsFile; stored: boolean; seconds: number }>;
  /** Ends the worker at once (the clips it finished stay stored for the next run); `done` rejects with CANCELLED. */
  stop(): void;
}

export function defaultCalibrationWorker(): Worker {
  return new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: 'wnw-calibrate' });
}

/**
 * Calibrates the folder at `base` (a URL, or a picked folder's `wnw-files://` address) in a
 * worker of its own. The heads file it makes is stored in this browser for the folder.
 */
export function startCalibration(
  base: string,
  clips: WireClip[],
  o: {
    directions: number;
    language?: string;
    onStatus?: (text: string) => void;
    onProgress?: (p: CalibrationProgress) => void;
  },
  makeWorker: () => Worker = defaultCalibrationWorker,
): CalibrationRun {
  const picked = localFolderFiles(base);
  const req: CalibrateRequest = {
    model: picked ? { kind: 'picked', name: picked.name, files: [...picked.files] } : { kind: 'url', url: base },
    clips,
    directions: o.directions,
    ...(o.language ? { language: o.language } : {}),
  };
  const worker = makeWorker();
  let fail: (e: unknown) => void = () => {};
  const done = new Promise<{ heads: HeadsFile; stored: boolean; seconds: number }>((resolve, reject) => {
    fail = reject;
    worker.addEventListener('message', (e: MessageEvent<FromCalibrateWorker>) => {
      const m = e.data;
      if (m.type === 'status') o.onStatus?.(m.text);
      else if (m.type === 'progress') o.onProgress?.(m.progress);
      else {
        worker.terminate();
        if (m.type === 'done') resolve(m);
        else reject(deserializeError(m.error));
      }
    });
    worker.addEventListener('error', (e: ErrorEvent) => {
      worker.terminate();
      reject(new Error(`the calibration worker failed: ${e.message || 'could not start'}`));
    });
  });
  worker.postMessage(req);
  return {
    done,
    stop() {
      worker.terminate();
      fail(deserializeError({ name: 'CancelledError', message: 'calibration stopped', code: 'CANCELLED' }));
    },
  };
}
