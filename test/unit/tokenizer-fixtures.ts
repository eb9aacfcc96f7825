/**
 * Tokenizer files written by training/hf/tokenizers.py (the writers the miniatures use),
 * generated once per content hash of the script, plus its plain-Python reference encoders.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const SCRIPT = resolve('training/hf/tokenizers.py');
const PYTHON = '/usr/bin/python3';

/** DIR with qwen2_5_omni/, qwen2_audio/ and voxtral/ tokenizer files. */
export function tokenizerDir(): string {
  const hash = createHash('sha256').update(readFileSync(SCRIPT)).digest('hex').slice(0, 16);
  const dir = resolve('.cache', `tokenizers-${hash}`);
  if (existsSync(join(dir, 'voxtral', 'tokenizer.json'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  mkdirSync(tmp, { recursive: true });
  const r = spawnSync(PYTHON, [SCRIPT, 'write', '--out', tmp], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tokenizers.py write failed: ${r.stderr}`);
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another worker got there first
  }
  return dir;
}

export const readJsonFile = (p: string): unknown => JSON.parse(readFileSync(p, 'utf8'));

/** Ids from the Python reference encoder ('encode-tekken' or 'encode-qwen') for each text. */
export function referenceIds(command: 'encode-tekken' | 'encode-qwen', file: string, texts: string[]): number[][] {
  const r = spawnSync(PYTHON, [SCRIPT, command, file, ...texts], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tokenizers.py ${command} failed: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as number[]);
}

/** A prompt as training/hf/prompts.py builds it from the upstream rules: all ids for N audio tokens, the stop ids and the tokenizer's eos. */
export interface ReferencePrompt {
  ids: number[];
  stop: number[];
  eos: number;
}

/** Whether the reference can render chat templates (jinja2 for /usr/bin/python3: Debian's python3-jinja2). */
export const hasJinja2 = (): boolean => spawnSync(PYTHON, ['-c', 'import jinja2']).status === 0;

/** The reference prompt for each [task, language or 'none', target or '-'] case of `family`, from the tokenizer folder `dir`. */
export function referencePrompts(
  dir: string,
  family: string,
  n: number,
  cases: [string, string, string][],
): ReferencePrompt[] {
  const r = spawnSync(PYTHON, [resolve('training/hf/prompts.py'), 'ids', dir, family, String(n), ...cases.flat()], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`prompts.py ids failed: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ReferencePrompt);
}
