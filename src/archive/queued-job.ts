/**
 * A queued job as a worker receives it: untrusted. Anyone who can write to the queue writes its
 * data, so before anything is read or written each job is checked field by field and its paths
 * are placed inside the folders the worker was started with: its output under `--out` (the job's
 * `out` may name that folder or a sub-folder of it, nothing else) and, with `--input-root`, its
 * recording under that root once symlinks are resolved. What comes out is the job the worker
 * runs, with those checked paths; a job that fails the check fails once with a BadJobError.
 */
import { realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { WnwError } from '../errors.js';
import { KV_PRECISIONS } from '../kv/precision.js';
import { AUDIO_ENCODERS } from '../model/hf/onnx-audio.js';
import { WEIGHT_FORMATS } from '../model/packed-weights.js';
import { isLanguageOption, LANGUAGE_FORMS } from '../model/text/language.js';
import { POLICIES } from '../option-values.js';
import { OUTPUT_FORMATS } from '../output-formats.js';
import { optionsHash, type LoadSettings, type RecordingJob, type RecordingOptions } from './job.js';
import { RECORD_DIR } from './output.js';

/** A queued job that this worker refuses: malformed, or pointing outside the worker's folders. */
export class BadJobError extends WnwError {
  constructor(
    /** The job's field at fault, e.g. `name`, `options.budget`. */
    readonly field: string,
    message: string,
  ) {
    super('BAD_ARGUMENT', message);
    this.name = 'BadJobError';
  }
}

/** The folders a worker was started with, resolved once at start. */
export interface WorkerFolders {
  /** `--out`, absolute, as given: a job's absolute `out` is compared with it as written. */
  out: string;
  /** `--out` with its symlinks resolved: where the outputs really go. */
  outReal: string;
  /** `--input-root` with its symlinks resolved; absent, recordings are read wherever the job says. */
  inputRootReal?: string;
}

const ENQUEUE = 'enqueue the archive with `wnw batch --queue` (the same wnw version as the workers)';

const JOB_KEYS = ['file', 'name', 'out', 'format', 'options', 'load', 'modelIdentity', 'optionsHash'];
const OPTION_KEYS = ['policy', 'budget', 'language', 'task', 'targetLanguage'];
const LOAD_KEYS = ['kv', 'weights', 'audioEncoder', 'audioWeights'];

const shown = (v: unknown) => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
};

function record(v: unknown, field: string): Record<string, unknown> {
  if (!v || typeof v !== 'object' || Array.isArray(v))
    throw new BadJobError(field, `the job's ${field} is not an object (got ${shown(v)}): ${ENQUEUE}`);
  return v as Record<string, unknown>;
}

function onlyKeys(o: Record<string, unknown>, keys: readonly string[], field: string): void {
  const unknown = Object.keys(o).find((k) => !keys.includes(k));
  if (unknown !== undefined)
    throw new BadJobError(
      `${field}.${unknown}`,
      `the job's ${field} has an unknown field "${unknown}" (known: ${keys.join(', ')}): ${ENQUEUE}`,
    );
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], field: string): T {
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v))
    throw new BadJobError(
      field,
      `the job's ${field} must be one of ${allowed.join(', ')}, got ${shown(v)}: ${ENQUEUE}`,
    );
  return v as T;
}

function text(v: unknown, field: string): string {
  if (typeof v !== 'string' || v === '' || v.includes('\0'))
    throw new BadJobError(field, `the job's ${field} must be a non-empty string, got ${shown(v)}: ${ENQUEUE}`);
  return v;
}

/**
 * A relative path of '/'-separated names, none of them empty, '.' or '..': one that stays
 * below the folder it is joined to whatever it holds. A backslash separates too, as on Windows.
 */
function relativePath(v: unknown, field: string, example: string): string {
  const s = text(v, field);
  const parts = s.split(/[\\/]/);
  const why =
    isAbsolute(s) || /^[A-Za-z]:/.test(s) || s.startsWith('/') || s.startsWith('\\')
      ? 'is an absolute path'
      : parts.includes('..')
        ? 'climbs out with ".."'
        : parts.some((p) => p === '' || p === '.')
          ? 'has an empty or "." part'
          : undefined;
  if (why)
    throw new BadJobError(
      field,
      `the job's ${field} ${shown(s)} ${why}: it must be a path under the worker's --out, '/'-separated names without ".." (e.g. ${shown(example)}); ${ENQUEUE}`,
    );
  return s;
}

function recordingOptions(v: unknown): RecordingOptions {
  const o = record(v, 'options');
  onlyKeys(o, OPTION_KEYS, 'options');
  const budget = o.budget;
  if (typeof budget !== 'number' || !Number.isFinite(budget) || budget <= 0 || budget > 1)
    throw new BadJobError(
      'options.budget',
      `the job's options.budget must be a number in (0, 1], got ${shown(budget)}: ${ENQUEUE}`,
    );
  const options: RecordingOptions = { policy: oneOf(o.policy, POLICIES, 'options.policy'), budget };
  if (o.language !== undefined) {
    if (typeof o.language !== 'string' || !isLanguageOption(o.language))
      throw new BadJobError(
        'options.language',
        `the job's options.language takes ${LANGUAGE_FORMS}, got ${shown(o.language)}: ${ENQUEUE}`,
      );
    options.language = o.language;
  }
  if (o.task !== undefined) options.task = oneOf(o.task, ['transcribe', 'translate'] as const, 'options.task');
  if (o.targetLanguage !== undefined) {
    if (options.task !== 'translate')
      throw new BadJobError(
        'options.targetLanguage',
        `the job's options.targetLanguage goes with task "translate" only: ${ENQUEUE}`,
      );
    if (typeof o.targetLanguage !== 'string' || o.targetLanguage === 'none' || !isLanguageOption(o.targetLanguage))
      throw new BadJobError(
        'options.targetLanguage',
        `the job's options.targetLanguage takes a language code such as "de", got ${shown(o.targetLanguage)}: ${ENQUEUE}`,
      );
    options.targetLanguage = o.targetLanguage;
  }
  return options;
}

function loadSettings(v: unknown): LoadSettings {
  const o = record(v, 'load');
  onlyKeys(o, LOAD_KEYS, 'load');
  return {
    kv: oneOf(o.kv, KV_PRECISIONS, 'load.kv'),
    weights: oneOf(o.weights, WEIGHT_FORMATS, 'load.weights'),
    ...(o.audioEncoder !== undefined
      ? { audioEncoder: oneOf(o.audioEncoder, AUDIO_ENCODERS, 'load.audioEncoder') }
      : {}),
    ...(o.audioWeights !== undefined
      ? { audioWeights: oneOf(o.audioWeights, WEIGHT_FORMATS, 'load.audioWeights') }
      : {}),
  };
}

/** A job on the queue as `wnw batch --queue` writes it: every field's type and value, its `out` still as written. */
export interface QueuedJobShape extends Omit<RecordingJob, 'out'> {
  out?: string;
}

/** The job's fields checked one by one; the paths are placed by `placeQueuedJob`. */
export function checkJobShape(data: unknown): QueuedJobShape {
  const d = record(data, 'data');
  onlyKeys(d, JOB_KEYS, 'data');
  const file = text(d.file, 'file');
  if (!isAbsolute(file))
    throw new BadJobError('file', `the job's file ${shown(file)} is not an absolute path: ${ENQUEUE}`);
  const name = relativePath(d.name, 'name', '2021/lecture-03');
  if (name.split(/[\\/]/)[0] === RECORD_DIR)
    throw new BadJobError(
      'name',
      `the job's name ${shown(name)} is inside ${RECORD_DIR}/, the done records' folder: ${ENQUEUE}`,
    );
  const out = d.out === undefined ? undefined : text(d.out, 'out');
  const format = oneOf(d.format, OUTPUT_FORMATS, 'format');
  const options = recordingOptions(d.options);
  const load = loadSettings(d.load);
  const modelIdentity = text(d.modelIdentity, 'modelIdentity');
  const hash = d.optionsHash;
  if (typeof hash !== 'string' || hash !== optionsHash(options, format, load, modelIdentity))
    throw new BadJobError(
      'optionsHash',
      `the job's optionsHash ${shown(hash)} is not the hash of its options, format, load settings and model: ` +
        `outputs would be recorded as made with options they were not made with; ${ENQUEUE}`,
    );
  return { file, name, ...(out !== undefined ? { out } : {}), format, options, load, modelIdentity, optionsHash: hash };
}

const within = (root: string, path: string) => {
  const r = relative(root, path);
  return r === '' || (r !== '..' && !r.startsWith(`..${sep}`) && !isAbsolute(r));
};

/** The real path of `path`'s deepest existing folder: what a write under `path` goes through. */
async function realAncestor(path: string): Promise<string> {
  for (let p = path; ; p = resolve(p, '..')) {
    try {
      return await realpath(p);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || p === resolve(p, '..')) throw e;
    }
  }
}

/**
 * The output folder the job writes to: the worker's --out where the job names none, a sub-folder
 * of it where `out` is relative, and an absolute `out` only where it is --out or inside it (the
 * enqueuer's --out on a shared folder mounted at the same path).
 */
function outputFolder(out: string | undefined, folders: WorkerFolders): string {
  if (out === undefined) return folders.out;
  const dir = isAbsolute(out) ? resolve(out) : join(folders.out, relativePath(out, 'out', '2021'));
  if (within(folders.out, dir) || within(folders.outReal, dir)) {
    if ([folders.out, folders.outReal].some((root) => within(join(root, RECORD_DIR), dir)))
      throw new BadJobError(
        'out',
        `the job's out ${shown(out)} is inside ${RECORD_DIR}/, the done records' folder: ${ENQUEUE}`,
      );
    return dir;
  }
  throw new BadJobError(
    'out',
    `the job's out ${shown(out)} is outside this worker's --out ${folders.out}: start the worker with --out set to the ` +
      "folder the archive was enqueued with (the same shared folder), or enqueue with --out inside the worker's",
  );
}

/**
 * The job this worker runs: `out` inside --out (symlinks included: a folder under --out that
 * links elsewhere is refused) and, with an input root, `file` replaced by its real path inside it.
 */
export async function placeQueuedJob(job: QueuedJobShape, folders: WorkerFolders): Promise<RecordingJob> {
  const out = outputFolder(job.out, folders);
  const leaf = `${job.name}.${job.format}`;
  for (const path of [join(out, leaf), join(out, RECORD_DIR, `${leaf}.json`)]) {
    // The names were checked part by part; this holds whatever a later change to them lets through.
    if (!within(folders.out, path) && !within(folders.outReal, path))
      throw new BadJobError(
        'name',
        `the job's output ${path} is outside this worker's --out ${folders.out}: ${ENQUEUE}`,
      );
    const real = await realAncestor(resolve(path, '..'));
    if (!within(folders.outReal, real))
      throw new BadJobError(
        'out',
        `the job's output ${path} goes through ${real}, outside this worker's --out ${folders.outReal} (a symlink): ` +
          'remove the link, or give --out the folder it leads to',
      );
  }
  let file = job.file;
  if (folders.inputRootReal !== undefined) {
    try {
      file = await realpath(file);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new BadJobError(
        'file',
        `cannot read ${job.file}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}. Check the path; ` +
          "a queue's workers must see the recordings at the path they were enqueued with (a shared folder).",
      );
    }
    if (!within(folders.inputRootReal, file))
      throw new BadJobError(
        'file',
        `the job's file ${job.file}${file !== job.file ? ` (really ${file})` : ''} is outside this worker's --input-root ` +
          `${folders.inputRootReal}: enqueue recordings from under it, or start the worker with the --input-root that holds them`,
      );
  }
  return { ...job, file, out };
}

/** Checks and places a job as it comes off the queue; throws a BadJobError for one this worker must not run. */
export async function checkQueuedJob(data: unknown, folders: WorkerFolders): Promise<RecordingJob> {
  return placeQueuedJob(checkJobShape(data), folders);
}

/** The folders of `wnw worker --out DIR [--input-root DIR]`, resolved once: both must exist. */
export async function workerFolders(out: string, inputRoot?: string): Promise<WorkerFolders> {
  const real = async (dir: string, flag: string) => {
    try {
      return await realpath(dir);
    } catch {
      throw new WnwError('BAD_ARGUMENT', `${flag} ${dir}: no such folder: create it, or mount the shared folder there`);
    }
  };
  const absolute = resolve(out);
  return {
    out: absolute,
    outReal: await real(absolute, '--out'),
    ...(inputRoot !== undefined ? { inputRootReal: await real(resolve(inputRoot), '--input-root') } : {}),
  };
}
