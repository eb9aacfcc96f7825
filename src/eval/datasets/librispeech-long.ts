/**
 * LibriSpeech-Long (github.com/google-deepmind/librispeech-long): LibriSpeech's dev and test
 * sets re-cut into contiguous examples of up to 4 minutes. Its README gives the download but
 * not the tree; this reader takes the LibriSpeech nesting it derives from: split folders
 * (`dev-clean/`, `test-other/`, ...) with speaker/chapter folders below, each example an audio
 * file (`.flac` or `.wav`) whose reference is either a same-named `.txt` next to it or its line
 * (`ID TEXT`) in the folder's `*.trans.txt`. Clip ids are the relative path without extension.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { UsageError } from '../../cli/args.js';
import { type EvalClip, dataFiles } from './clip.js';

const AUDIO = /\.(flac|wav)$/i;

export async function readLibrispeechLong(dir: string, warn: (s: string) => void): Promise<EvalClip[]> {
  const files = await dataFiles(dir);
  // Every folder's `*.trans.txt` lines, by utterance id.
  const trans = new Map<string, string>();
  for (const f of files.filter((f) => f.endsWith('.trans.txt'))) {
    for (const line of (await readFile(join(dir, f), 'utf8')).split('\n')) {
      const m = /^(\S+)\s+(.*\S)\s*$/.exec(line);
      if (m) trans.set(posix.join(posix.dirname(f), m[1]), m[2]);
    }
  }
  const set = new Set(files);
  const clips: EvalClip[] = [];
  for (const f of files.filter((f) => AUDIO.test(f))) {
    const id = f.replace(AUDIO, '');
    let reference = trans.get(id);
    if (reference === undefined && set.has(`${id}.txt`))
      reference = (await readFile(join(dir, `${id}.txt`), 'utf8')).trim();
    if (reference === undefined)
      warn(
        `skipping ${f}: no ${posix.basename(id)}.txt or *.trans.txt line in ${dirname(f) === '.' ? 'its folder' : dirname(f)}`,
      );
    else clips.push({ id, wav: join(dir, f), reference });
  }
  if (!clips.length)
    throw new UsageError(`no LibriSpeech-Long examples (.flac or .wav with a transcript) under ${dir}`);
  return clips;
}
