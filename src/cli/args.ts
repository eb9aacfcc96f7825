/**
 * Argument parsing shared by `wnw transcribe` and `npm run eval`. Hand-rolled because
 * the grammar is tiny and a dependency would be the only one the CLI pulls in.
 * Every mistake becomes a UsageError whose message is one line a person can act on; the
 * values' own parsers (a policy, a budget, a format) are option-values.ts's. The flags each
 * `wnw` command knows are its rows of the flag table (flags.ts), which its --help prints.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isWeightFormat } from '../model/packed-weights.js';
import { PACKED_MARKER } from '../model/packed-folder.js';
import type { AudioEncoderChoice } from '../model/hf/onnx-audio.js';
import { isLanguageOption, LANGUAGE_FORMS } from '../model/text/language.js';
import { PROMPT_TASKS, type PromptTask } from '../model/text/prompt.js';
import type { PolicyName } from '../index.js';
import type { KvPrecision, WeightFormat } from '../index.js';
import {
  UsageError,
  parseAudioEncoder,
  parseBackend,
  parseBudget,
  parseKvPrecision,
  parseOutputFormat,
  parsePolicy,
  parseWeightFormat,
  type BackendChoice,
} from '../option-values.js';
import type { OutputFormat } from '../output-formats.js';
import { parserFlags, type Command } from './flags.js';
import { usageLine } from './help.js';

// The values' parsers, for the commands and tools that take them from here.
export * from '../option-values.js';
export { OUTPUT_FORMATS, type OutputFormat } from '../output-formats.js';

export interface TranscribeArgs {
  file: string;
  policy: PolicyName;
  /** Why the policy is not the default one, when --policy was not given (defaultPolicy). */
  policyNote?: string;
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

/**
 * Splits argv into flags (`--name value`, `--name=value`, boolean `--name`) and positionals.
 * Given `known`, a flag not in it is an error where it stands, before it could take the next
 * argument as its value (`--frobnicate FILE` is an unknown option, not a missing file).
 */
export function splitArgs(
  argv: string[],
  booleans: readonly string[],
  known?: readonly string[],
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
    if (known && !known.includes(name)) throw new UsageError(`unknown option --${name}`);
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

/** argv split by the command's rows of the flag table (flags.ts): the flags it knows, and which of them are switches. */
export function commandArgs(command: Command, argv: string[]): { flags: Map<string, string>; positional: string[] } {
  const { known, switches } = parserFlags(command);
  return splitArgs(argv, switches, known);
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

/**
 * The policy when --policy is not given: WnW where the folder has its heads.json, else the
 * full cache (a downloaded folder has none until `wnw calibrate` writes it), with the line
 * that says so.
 */
export function defaultPolicy(model: string): { policy: PolicyName; note?: string } {
  if (existsSync(join(model, 'heads.json'))) return { policy: 'wnw' };
  return {
    policy: 'full',
    note:
      `${model} has no heads.json, so this runs the full cache; WnW needs the head triage first ` +
      `(npx wnw calibrate --model ${model}), or pass --policy to choose`,
  };
}

export const TRANSCRIBE_USAGE = usageLine('transcribe');

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
    ...(flags.has('policy')
      ? { policy: parsePolicy(flags.get('policy')!) }
      : (({ policy, note }) => ({ policy, ...(note ? { policyNote: note } : {}) }))(defaultPolicy(model))),
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

export const ASK_USAGE = usageLine('ask');

export function parseAskArgs(argv: string[], cwd = process.cwd()): AskArgs {
  const { flags, positional } = commandArgs('ask', argv);
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
  /** --window S: seconds of audio a hypothesis attends at most (LiveOptions.windowSeconds); absent: its default. */
  windowSeconds?: number;
  json: boolean;
}

export const LIVE_USAGE = usageLine('live');

export function parseLiveArgs(argv: string[], cwd = process.cwd()): LiveArgs {
  const { flags, positional } = commandArgs('live', argv);
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
  const tickSeconds = positive('tick', flags.get('tick')) ?? 2;
  const windowSeconds = positive('window', flags.get('window'));
  if (windowSeconds !== undefined && windowSeconds < 2 * tickSeconds)
    throw new UsageError(`--window must be at least twice --tick (${2 * tickSeconds} s), got ${windowSeconds}`);
  return {
    ...parseLoadArgs(flags, cwd),
    ...(simulate !== undefined ? { simulate: resolve(cwd, simulate) } : {}),
    ...(speed !== undefined ? { speed } : {}),
    tickSeconds,
    ...(windowSeconds !== undefined ? { windowSeconds } : {}),
    json: flags.get('json') === 'true',
  };
}

export function parseTranscribeArgs(argv: string[], cwd = process.cwd()): TranscribeArgs {
  const { flags, positional } = commandArgs('transcribe', argv);
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
