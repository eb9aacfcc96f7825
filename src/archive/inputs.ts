/**
 * What `wnw batch IN...` transcribes: audio files, folders (searched for audio files, their
 * subfolders kept in the outputs' names) and manifests, a list of paths one a line (.txt, .list)
 * or JSON lines with per-recording options (.jsonl). Every mistake here is a UsageError naming the
 * input and the line, raised before any recording is transcribed.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path';
import { UsageError, parseBudget, parsePolicy } from '../option-values.js';
import { isLanguageOption, LANGUAGE_FORMS } from '../model/text/language.js';
import type { RecordingOptions } from './job.js';

export interface ArchiveInput {
  file: string;
  /** The output's path under --out without extension, '/'-separated. */
  name: string;
  /** A JSONL manifest line's own options, over the command line's. */
  options: Partial<RecordingOptions>;
}

/** Extensions a folder is searched for; a file named on the command line or in a manifest is decoded whatever its name. */
export const AUDIO_EXTENSIONS = ['.wav', '.mp3', '.flac', '.ogg', '.oga', '.opus', '.m4a', '.aac', '.mp4'];
const LIST_EXTENSIONS = ['.txt', '.list', '.lst'];

const stem = (path: string) => basename(path, extname(path));
const posix = (path: string) => path.split(sep).join('/');

function folderInputs(dir: string): ArchiveInput[] {
  const found: ArchiveInput[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (entry.name.startsWith('.')) continue;
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (AUDIO_EXTENSIONS.includes(extname(entry.name).toLowerCase()))
        found.push({ file: path, name: posix(join(relative(dir, dirname(path)), stem(path))), options: {} });
    }
  };
  walk(dir);
  return found;
}

const MANIFEST_KEYS = ['file', 'out', 'policy', 'budget', 'language', 'task', 'targetLanguage'];

function manifestLineOptions(o: Record<string, unknown>, where: string): Partial<RecordingOptions> {
  const unknown = Object.keys(o).filter((k) => !MANIFEST_KEYS.includes(k));
  if (unknown.length) throw new UsageError(`${where}: unknown key ${unknown[0]} (known: ${MANIFEST_KEYS.join(', ')})`);
  const options: Partial<RecordingOptions> = {};
  try {
    if (o.policy !== undefined) options.policy = parsePolicy(String(o.policy));
    if (o.budget !== undefined) options.budget = parseBudget(String(o.budget));
  } catch (e) {
    throw new UsageError(`${where}: ${(e as Error).message}`);
  }
  if (o.language !== undefined) {
    if (typeof o.language !== 'string' || !isLanguageOption(o.language))
      throw new UsageError(`${where}: language takes ${LANGUAGE_FORMS}, got ${JSON.stringify(o.language)}`);
    options.language = o.language;
  }
  if (o.task !== undefined) {
    if (o.task !== 'transcribe' && o.task !== 'translate')
      throw new UsageError(`${where}: task is transcribe or translate, got ${JSON.stringify(o.task)}`);
    options.task = o.task;
  }
  if (o.targetLanguage !== undefined) {
    if (typeof o.targetLanguage !== 'string' || o.targetLanguage === 'none' || !isLanguageOption(o.targetLanguage))
      throw new UsageError(`${where}: targetLanguage takes a language code such as "de"`);
    options.targetLanguage = o.targetLanguage;
  }
  return options;
}

function manifestInputs(path: string): ArchiveInput[] {
  const base = dirname(path);
  const jsonl = extname(path).toLowerCase() === '.jsonl';
  const inputs: ArchiveInput[] = [];
  readFileSync(path, 'utf8')
    .split(/\r?\n/)
    .forEach((line, i) => {
      const where = `${path}:${i + 1}`;
      const text = line.trim();
      if (!text || text.startsWith('#')) return;
      if (!jsonl) {
        const file = resolve(base, text);
        inputs.push({ file, name: stem(file), options: {} });
        return;
      }
      let o: unknown;
      try {
        o = JSON.parse(text);
      } catch {
        throw new UsageError(`${where}: not a JSON object (a JSONL manifest holds one {"file": ...} a line)`);
      }
      if (!o || typeof o !== 'object' || Array.isArray(o) || typeof (o as { file?: unknown }).file !== 'string')
        throw new UsageError(`${where}: each line needs "file", the recording's path`);
      const r = o as Record<string, unknown>;
      const file = resolve(base, r.file as string);
      if (r.out !== undefined && (typeof r.out !== 'string' || !r.out || r.out.split(/[\\/]/).includes('..')))
        throw new UsageError(`${where}: "out" is the output's name under --out, without "..", e.g. "2021/lecture-03"`);
      inputs.push({ file, name: (r.out as string | undefined) ?? stem(file), options: manifestLineOptions(r, where) });
    });
  return inputs;
}

/**
 * The recordings of `paths`, in order, each once. Two recordings that would write the same
 * output are refused: one would overwrite the other.
 */
export function archiveInputs(paths: readonly string[], cwd = process.cwd()): ArchiveInput[] {
  const all: ArchiveInput[] = [];
  for (const p of paths) {
    const path = resolve(cwd, p);
    let st;
    try {
      st = statSync(path);
    } catch {
      throw new UsageError(`${p}: no such file or folder`);
    }
    if (st.isDirectory()) {
      const found = folderInputs(path);
      if (!found.length) throw new UsageError(`${p}: no audio files (${AUDIO_EXTENSIONS.join(' ')}) in this folder`);
      all.push(...found);
    } else if (extname(path).toLowerCase() === '.jsonl' || LIST_EXTENSIONS.includes(extname(path).toLowerCase())) {
      all.push(...manifestInputs(path));
    } else all.push({ file: path, name: stem(path), options: {} });
  }
  const byFile = new Set<string>();
  const byName = new Map<string, string>();
  const inputs: ArchiveInput[] = [];
  for (const input of all) {
    if (byFile.has(input.file)) continue;
    byFile.add(input.file);
    const other = byName.get(input.name);
    if (other !== undefined)
      throw new UsageError(
        `${other} and ${input.file} would both be written as "${input.name}": pass their folder instead, or name them with "out" in a JSONL manifest`,
      );
    byName.set(input.name, input.file);
    inputs.push(input);
  }
  return inputs;
}
