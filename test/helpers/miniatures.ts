/**
 * The random-weight Hugging Face miniatures (training/hf/miniatures.py): voxtral/,
 * qwen2_audio/ and qwen2_5_omni/, written once per content of the scripts that make
 * them and cached under .cache/miniatures/<hash>/.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PY = '/usr/bin/python3';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPTS = ['training/hf/miniatures.py', 'training/hf/tokenizers.py', 'training/hf/bpe.py'];

export type MiniatureFamily = 'voxtral' | 'qwen2_audio' | 'qwen2_5_omni';
export const MINIATURE_FAMILIES: readonly MiniatureFamily[] = ['voxtral', 'qwen2_audio', 'qwen2_5_omni'];

function scriptsHash(): string {
  const h = createHash('sha256');
  for (const s of SCRIPTS) {
    const p = join(ROOT, s);
    h.update(s).update(existsSync(p) ? readFileSync(p) : 'absent');
  }
  return h.digest('hex').slice(0, 16);
}

/** The folder holding the three miniatures (written on first use). */
export async function ensureMiniatures(): Promise<string> {
  const dir = join(ROOT, '.cache', 'miniatures', scriptsHash());
  if (existsSync(join(dir, '.complete'))) return dir;
  // Written beside the final place and renamed, so a concurrent or interrupted run never
  // leaves a half-written folder that looks complete.
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  execFileSync(PY, [join(ROOT, 'training/hf/miniatures.py'), '--out', tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
  writeFileSync(join(tmp, '.complete'), new Date().toISOString());
  if (existsSync(join(dir, '.complete'))) {
    rmSync(tmp, { recursive: true, force: true });
  } else {
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  }
  pruneStale(dirname(dir), dir);
  return dir;
}

/** Miniatures of earlier script versions (about 150 MB each), once they are an hour old. */
function pruneStale(parent: string, keep: string): void {
  for (const name of readdirSync(parent)) {
    const p = join(parent, name);
    if (p !== keep && Date.now() - statSync(p).mtimeMs > 3600_000) rmSync(p, { recursive: true, force: true });
  }
}

/** One family's folder. */
export async function miniature(family: MiniatureFamily): Promise<string> {
  return join(await ensureMiniatures(), family);
}

/** A folder of links to a miniature's files (its heads.json, if any, left out), for tests that write beside the model. */
export function linkedCopy(src: string, dst: string): string {
  mkdirSync(dst, { recursive: true });
  for (const f of readdirSync(src)) if (f !== 'heads.json') symlinkSync(join(src, f), join(dst, f));
  return dst;
}
