/** Today's default layout (`--format wav-txt`): NAME.wav beside NAME.txt, its reference. */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../../cli/args.js';
import type { EvalClip } from './clip.js';

/** Clips of DIR in name order; a `.wav` without its `.txt` is skipped with a warning, not silently. */
export async function listClips(dir: string, warn: (s: string) => void): Promise<EvalClip[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    throw new UsageError(`cannot read the data folder ${dir}`);
  }
  const clips: EvalClip[] = [];
  for (const name of names.filter((n) => n.toLowerCase().endsWith('.wav')).sort()) {
    const id = name.slice(0, -4);
    try {
      const reference = (await readFile(join(dir, `${id}.txt`), 'utf8')).trim();
      clips.push({ id, wav: join(dir, name), reference });
    } catch {
      warn(`skipping ${name}: no ${id}.txt reference next to it`);
    }
  }
  if (!clips.length) throw new UsageError(`no *.wav files with a matching *.txt in ${dir}`);
  return clips;
}
