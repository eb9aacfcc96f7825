import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../../cli/args.js';

/** One evaluation clip, whatever layout it was read from. */
export interface EvalClip {
  id: string;
  /** The clip's audio file; with several (PriMock57's doctor and patient), their decoded audio is averaged into one. */
  wav: string | string[];
  /** The transcript reference (WER). */
  reference: string;
  /** The target-language reference, where the dataset has one (BLEU with --task translate). */
  translation?: string;
}

/** Files under DIR (relative paths with '/'), depth first in name order. */
export async function walk(dir: string, sub = ''): Promise<string[]> {
  const out: string[] = [];
  const entries = (await readdir(join(dir, sub), { withFileTypes: true })).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  for (const e of entries) {
    const rel = sub ? `${sub}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(dir, rel)));
    else if (e.isFile()) out.push(rel);
  }
  return out;
}

/** walk(dir), or a usage error naming the folder it could not read. */
export function dataFiles(dir: string): Promise<string[]> {
  return walk(dir).catch(() => {
    throw new UsageError(`cannot read the data folder ${dir}`);
  });
}
