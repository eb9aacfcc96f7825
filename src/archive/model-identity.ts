/**
 * A model folder's identity, the same on every machine that holds a copy of it wherever it is
 * mounted: an archive's outputs name the model they came from by it, so a rerun with another
 * model redoes them and a worker serving another model refuses the job instead of mislabelling
 * its output.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { WnwError } from '../errors.js';
import { PACKED_MARKER } from '../model/packed-folder.js';

/** Files whose bytes are hashed: small, and they decide what the weights mean and which heads WnW keeps. */
const HASHED = new Set(['config.json', 'heads.json', 'tokenizer.json', PACKED_MARKER]);

/**
 * sha256 over config.json, heads.json and the tokenizer's bytes, and over every file's path and
 * size: the weights' gigabytes are not read, a retrained or reconverted checkpoint changes their sizes or its config.
 */
export function modelIdentity(dir: string): string {
  const files: string[] = [];
  const walk = (d: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(d).sort();
    } catch (e) {
      throw new WnwError(
        'MODEL_LOAD',
        `cannot read the model folder ${d}: ${(e as Error).message}. Pass --model DIR, a folder with config.json.`,
      );
    }
    for (const name of names) {
      if (name.startsWith('.')) continue;
      const path = join(d, name);
      const st = statSync(path);
      if (st.isDirectory()) {
        if (depth < 2) walk(path, depth + 1);
      } else files.push(path);
    }
  };
  walk(dir, 0);
  if (!files.some((f) => relative(dir, f) === 'config.json'))
    throw new WnwError('MODEL_LOAD', `${dir} has no config.json: pass --model DIR, a model folder.`);
  const h = createHash('sha256');
  for (const f of files) {
    const rel = relative(dir, f).split('\\').join('/');
    h.update(`${rel}\0${statSync(f).size}\0`);
    if (HASHED.has(rel)) h.update(readFileSync(f));
  }
  return h.digest('hex');
}
