/**
 * A page's calibration clips for `Transcriber.calibrate`: the site's calibration set, chosen
 * as `wnw calibrate --limit N` chooses from a folder, or the user's own WAV + JSON pairs; and
 * whether a folder already has heads. Nothing here computes: the transcriber does.
 */
// From its module, not the entry: the page's bundle carries no engine (main.ts loads it lazily).
import { WnwError } from '../errors.js';
import { exists, joinModelPath } from '../model/files.js';
import { readStoredHeads } from '../model/heads-store.js';
import { forwardsPerClip } from './cost.js';
import type { CalibrationClip } from '../types.js';

export { forwardsPerClip };

/** Where a folder's heads come from: heads.json in it, one stored by an earlier calibration in this browser, or none. */
export async function headsState(base: string): Promise<'folder' | 'stored' | 'none'> {
  if (await exists(joinModelPath(base, 'heads.json'))) return 'folder';
  return (await readStoredHeads(base)) !== null ? 'stored' : 'none';
}

type ClipJson = Pick<CalibrationClip, 'text' | 'words' | 'tokens'>;

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
export async function siteClips(base: URL, limit: number): Promise<CalibrationClip[]> {
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
export async function clipsFromFiles(files: File[]): Promise<CalibrationClip[]> {
  const wav = new Map(files.filter((f) => /\.wav$/i.test(f.name)).map((f) => [f.name.replace(/\.wav$/i, ''), f]));
  const clips: CalibrationClip[] = [];
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
