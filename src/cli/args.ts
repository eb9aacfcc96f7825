/**
 * Argument parsing shared by `wnw transcribe` and `npm run eval`. Hand-rolled because
 * the grammar is tiny and a dependency would be the only one the CLI pulls in.
 * Every mistake becomes a UsageError whose message is one line a person can act on.
 */
import { KV_PRECISIONS } from '../kv/precision.js';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEIGHT_FORMATS, isWeightFormat } from '../model/packed-weights.js';
import { PACKED_MARKER } from '../model/packed-folder.js';
import { checkPolicyOptions } from '../policy/registry.js';
import { AUDIO_ENCODERS, type AudioEncoderChoice } from '../model/hf/onnx-audio.js';
import { isLanguageOption, LANGUAGE_FORMS } from '../model/text/language.js';
import { PROMPT_TASKS, type PromptTask } from '../model/text/prompt.js';
import type { PolicyName } from '../index.js';
import type { KvPrecision, WeightFormat } from '../research.js';

export const POLICIES = [
  'full',
  'wnw',
  'snapkv',
  'adakv',
  'audiokv',
  'arkvale',
  'h2o',
  'streaming',
  'quest',
] as const satisfies readonly PolicyName[];
// Fails to compile when a policy is added to PolicyName but not here.
const everyPolicy: [Exclude<PolicyName, (typeof POLICIES)[number]>] extends [never] ? true : false = true;
void everyPolicy;

export const BACKENDS = ['auto', 'webgpu', 'cpu'] as const;
export type BackendChoice = (typeof BACKENDS)[number];

/** What `wnw transcribe` prints on stdout: the text, --json's object, or subtitles. */
export const OUTPUT_FORMATS = ['txt', 'json', 'srt', 'vtt'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export class UsageError extends Error {
  override name = 'UsageError';
}

export interface TranscribeArgs {
  file: string;
  policy: PolicyName;
  budget: number;
  backend: BackendChoice;
  kv: KvPrecision;
  /** The decoder's weight format (--weights; when not given, `defaultWeightFormat` of the folder). */
  weights: WeightFormat;
  model: string;
  /** Language of the speech (--language en), for models whose prompt names it; "none" for no language. */
  language?: string;
  /** --task translate --target-language de: the speech translated (Hugging Face models whose prompt recipe has a translation). */
  task?: PromptTask;
  targetLanguage?: string;
  /** A Hugging Face folder's audio encoder (--audio-encoder): its ONNX graph or its audio tower. */
  audioEncoder?: AudioEncoderChoice;
  /** A Hugging Face audio tower's weight format (--audio-weights; when not given, the transcriber's default beside the decoder's). */
  audioWeights?: WeightFormat;
  /** --format; --json is --format json. */
  format: OutputFormat;
}

/** The package root (the folder holding our package.json), found from this file so it works from src/ or a build. */
export function packageRoot(from = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${from}`);
    dir = up;
  }
}

export function defaultModelDir(): string {
  return join(packageRoot(), 'public', 'models', 'wnw-ref');
}

/** Splits argv into flags (`--name value`, `--name=value`, boolean `--name`) and positionals. */
export function splitArgs(
  argv: string[],
  booleans: readonly string[],
): { flags: Map<string, string>; positional: string[] } {
  const flags = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq < 0 ? undefined : eq);
    if (eq >= 0) flags.set(name, a.slice(eq + 1));
    else if (booleans.includes(name)) flags.set(name, 'true');
    else {
      const v = argv[i + 1];
      if (v === undefined || v.startsWith('--')) throw new UsageError(`--${name} needs a value`);
      flags.set(name, v);
      i++;
    }
  }
  return { flags, positional };
}

export function rejectUnknown(flags: Map<string, string>, known: readonly string[]): void {
  for (const k of flags.keys()) if (!known.includes(k)) throw new UsageError(`unknown option --${k}`);
}

export function parsePolicy(s: string): PolicyName {
  if (!(POLICIES as readonly string[]).includes(s))
    throw new UsageError(`unknown policy "${s}" (one of ${POLICIES.join(', ')})`);
  return s as PolicyName;
}

/** A policy with method, ablation or diagnosis options, as written on a command line: `wnw:ranking=voice:nVoice=8`. */
export interface PolicySpec {
  policy: PolicyName;
  /** For the policy's factory (as a transcriber's policyOptions: registry.forEvaluation); numbers and true/false are converted. */
  options: Record<string, string | number | boolean>;
  /** The options as written (`ranking=voice:nVoice=8`), '' for none: labels runs and table rows. */
  variant: string;
}

export function parsePolicySpec(s: string): PolicySpec {
  const [name, ...parts] = s.split(':');
  const policy = parsePolicy(name);
  const options: Record<string, string | number | boolean> = {};
  for (const part of parts) {
    const m = /^([A-Za-z]\w*)=([^=]+)$/.exec(part);
    if (!m) throw new UsageError(`policy option "${part}" in "${s}" is not key=value (e.g. wnw:ranking=voice)`);
    const v = m[2];
    options[m[1]] =
      v === 'true' ? true : v === 'false' ? false : v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  if (policy === 'full' && parts.length) throw new UsageError('the full cache takes no options');
  try {
    checkPolicyOptions(policy, options, 'evaluation');
  } catch (e) {
    throw new UsageError(`${(e as Error).message} (in "${s}")`);
  }
  return { policy, options, variant: parts.join(':') };
}

export function parseBudget(s: string): number {
  const b = Number(s);
  if (!(s.trim() !== '' && Number.isFinite(b) && b > 0 && b <= 1))
    throw new UsageError(`budget must be a number in (0, 1], got "${s}"`);
  return b;
}

export function parseBackend(s: string): BackendChoice {
  if (!(BACKENDS as readonly string[]).includes(s))
    throw new UsageError(`backend must be one of ${BACKENDS.join(', ')}, got "${s}"`);
  return s as BackendChoice;
}

export function parseKvPrecision(s: string): KvPrecision {
  if (!(KV_PRECISIONS as readonly string[]).includes(s))
    throw new UsageError(`kv must be one of ${KV_PRECISIONS.join(', ')}, got "${s}"`);
  return s as KvPrecision;
}

export function parseWeightFormat(s: string, flag = 'weights'): WeightFormat {
  if (!(WEIGHT_FORMATS as readonly string[]).includes(s))
    throw new UsageError(`${flag} must be one of ${WEIGHT_FORMATS.join(', ')}, got "${s}"`);
  return s as WeightFormat;
}

/** --format, and --json, which has always meant --format json and cannot mean another one beside it. */
export function parseOutputFormat(format: string | undefined, json: boolean): OutputFormat {
  if (format !== undefined && !(OUTPUT_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}, got "${format}"`);
  if (json && format !== undefined && format !== 'json')
    throw new UsageError(`--json is --format json: it cannot go with --format ${format}`);
  return json ? 'json' : ((format as OutputFormat | undefined) ?? 'txt');
}

export function parseAudioEncoder(s: string): AudioEncoderChoice {
  if (!(AUDIO_ENCODERS as readonly string[]).includes(s))
    throw new UsageError(`--audio-encoder must be one of ${AUDIO_ENCODERS.join(', ')}, got "${s}"`);
  return s as AudioEncoderChoice;
}

/**
 * --weights when not given: f32 for our own folders (the reference model's format); for a
 * Hugging Face folder q4, because in f32 the decoder alone is 14.95 GiB for Voxtral-Mini-3B
 * (2.10 GiB in q4; `decoderWeightBytes`) and its gate/up matrix passes a 128 MiB binding; a
 * folder packed by `npx wnw convert` keeps the format it was packed in. An unreadable
 * config is left to the loader to report.
 */
export function defaultWeightFormat(model: string): WeightFormat {
  const read = (name: string): Record<string, unknown> | null => {
    try {
      return JSON.parse(readFileSync(join(model, name), 'utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
  };
  const config = read('config.json');
  if (typeof config?.['model_type'] !== 'string') return 'f32';
  const packed = read(PACKED_MARKER)?.['format'];
  return isWeightFormat(packed) ? packed : 'q4';
}

export const TRANSCRIBE_USAGE =
  'usage: wnw transcribe FILE [--policy full|wnw|snapkv|adakv|audiokv|arkvale|h2o|streaming|quest] ' +
  '[--budget 0.2] [--backend auto|webgpu|cpu] [--kv f32|f16] [--weights f32|f16|q4] [--audio-weights f32|f16|q4] ' +
  '[--model DIR] [--language en|none] [--task transcribe|translate --target-language de] ' +
  '[--audio-encoder onnx|audio-tower] [--format txt|json|srt|vtt] [--json]';

/** The options that load a transcriber for a recording, as `transcribe`, `ask` and `batch` take them. */
export const LOAD_FLAGS = [
  'policy',
  'budget',
  'backend',
  'kv',
  'weights',
  'audio-weights',
  'model',
  'language',
  'audio-encoder',
];

export type LoadArgs = Omit<TranscribeArgs, 'file' | 'format' | 'task' | 'targetLanguage'>;

function parseLoadArgs(flags: Map<string, string>, cwd: string): LoadArgs {
  const language = flags.get('language');
  const encoder = flags.get('audio-encoder');
  if (language !== undefined && !isLanguageOption(language))
    throw new UsageError(`--language takes ${LANGUAGE_FORMS}, got "${language}"`);
  const model = flags.has('model') ? resolve(cwd, flags.get('model')!) : defaultModelDir();
  const weights = flags.get('weights');
  const audioWeights = flags.get('audio-weights');
  return {
    policy: parsePolicy(flags.get('policy') ?? 'wnw'),
    budget: parseBudget(flags.get('budget') ?? '0.2'),
    backend: parseBackend(flags.get('backend') ?? 'auto'),
    kv: parseKvPrecision(flags.get('kv') ?? 'f32'),
    weights: weights !== undefined ? parseWeightFormat(weights) : defaultWeightFormat(model),
    model,
    ...(language !== undefined ? { language } : {}),
    ...(encoder !== undefined ? { audioEncoder: parseAudioEncoder(encoder) } : {}),
    ...(audioWeights !== undefined ? { audioWeights: parseWeightFormat(audioWeights, 'audio-weights') } : {}),
  };
}

export interface AskArgs extends LoadArgs {
  file: string;
  /** Asked in order, in one conversation. */
  questions: string[];
  json: boolean;
}

export const ASK_USAGE =
  'usage: wnw ask FILE "question" ["follow-up" ...] [--model DIR] [--json] [--policy ...] [--budget 0.2] ' +
  '[--backend auto|webgpu|cpu] [--kv f32|f16] [--weights f32|f16|q4] [--language en|none]';

export function parseAskArgs(argv: string[], cwd = process.cwd()): AskArgs {
  const { flags, positional } = splitArgs(argv, ['json']);
  rejectUnknown(flags, [...LOAD_FLAGS, 'json']);
  if (positional.length < 2)
    throw new UsageError(positional.length ? 'missing the question' : 'missing the audio file and the question');
  const questions = positional.slice(1);
  if (questions.some((q) => !q.trim())) throw new UsageError('a question is empty');
  return {
    ...parseLoadArgs(flags, cwd),
    file: resolve(cwd, positional[0]),
    questions,
    json: flags.get('json') === 'true',
  };
}

export interface LiveArgs extends LoadArgs {
  /** --simulate FILE: the file's audio fed as if spoken; absent: 16 kHz mono s16le PCM from stdin. */
  simulate?: string;
  /** --speed N: the file fed at N times real time, its ticks not waited for; absent: each tick waited for (deterministic). */
  speed?: number;
  tickSeconds: number;
  json: boolean;
}

export const LIVE_USAGE =
  'usage: wnw live [--simulate FILE [--speed N]] [--tick 2] [--json] [--model DIR] [--policy ...] [--budget 0.2] ' +
  '[--backend auto|webgpu|cpu] [--kv f32|f16] [--weights f32|f16|q4] [--language en|none]';

export function parseLiveArgs(argv: string[], cwd = process.cwd()): LiveArgs {
  const { flags, positional } = splitArgs(argv, ['json']);
  rejectUnknown(flags, [...LOAD_FLAGS, 'simulate', 'speed', 'tick', 'json']);
  if (positional.length) throw new UsageError(`unexpected argument "${positional[0]}" (a file goes after --simulate)`);
  const positive = (name: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!(n > 0) || !Number.isFinite(n)) throw new UsageError(`--${name} takes a positive number, got "${v}"`);
    return n;
  };
  const simulate = flags.get('simulate');
  const speed = positive('speed', flags.get('speed'));
  if (speed !== undefined && simulate === undefined) throw new UsageError('--speed goes with --simulate FILE');
  return {
    ...parseLoadArgs(flags, cwd),
    ...(simulate !== undefined ? { simulate: resolve(cwd, simulate) } : {}),
    ...(speed !== undefined ? { speed } : {}),
    tickSeconds: positive('tick', flags.get('tick')) ?? 2,
    json: flags.get('json') === 'true',
  };
}

export function parseTranscribeArgs(argv: string[], cwd = process.cwd()): TranscribeArgs {
  const { flags, positional } = splitArgs(argv, ['json']);
  rejectUnknown(flags, [...LOAD_FLAGS, 'task', 'target-language', 'format', 'json']);
  const task = flags.get('task');
  const target = flags.get('target-language');
  if (task !== undefined && !(PROMPT_TASKS as readonly string[]).includes(task))
    throw new UsageError(`--task must be one of ${PROMPT_TASKS.join(', ')}, got "${task}"`);
  if (task === 'translate' && (target === undefined || target === 'none' || !isLanguageOption(target))) {
    throw new UsageError(
      `--task translate needs --target-language, a language code of 2 or 3 letters such as "de"${target !== undefined ? `, got "${target}"` : ''}`,
    );
  }
  if (task !== 'translate' && target !== undefined)
    throw new UsageError('--target-language goes with --task translate');
  if (positional.length !== 1)
    throw new UsageError(
      positional.length ? `expected one audio file, got ${positional.length}` : 'missing the audio file',
    );
  return {
    ...parseLoadArgs(flags, cwd),
    file: resolve(cwd, positional[0]),
    ...(task !== undefined ? { task: task as PromptTask } : {}),
    ...(target !== undefined ? { targetLanguage: target } : {}),
    format: parseOutputFormat(flags.get('format'), flags.get('json') === 'true'),
  };
}
