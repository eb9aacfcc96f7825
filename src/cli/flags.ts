/**
 * Every flag of every `wnw` subcommand, in one table: the parsers take their known flags and
 * switches from it, `wnw <command> --help` prints its rows, and docs/usage.md's flag tables
 * are rendered from it (scripts/cli-docs.ts), so the three cannot disagree.
 *
 * A flag whose meaning differs between commands (`--out` is a folder for `batch`, a file for
 * `calibrate`) has one row per meaning; a command never has two rows of the same name.
 */
import { KV_PRECISIONS } from '../kv/precision.js';
import { AUDIO_ENCODERS } from '../model/hf/onnx-audio.js';
import { WEIGHT_FORMATS } from '../model/packed-weights.js';
import { PROMPT_TASKS } from '../model/text/prompt.js';
import { BACKENDS, POLICIES } from '../option-values.js';
import { OUTPUT_FORMATS } from '../output-formats.js';

export const COMMANDS = ['transcribe', 'ask', 'live', 'batch', 'worker', 'convert', 'calibrate'] as const;

export type Command = (typeof COMMANDS)[number];

export interface FlagSpec {
  /** Without the dashes: `policy` is `--policy`. */
  name: string;
  /** A one-letter form (`-h`); only `--help` has one. */
  short?: string;
  /** What the value looks like (`DIR`, `f32|f16`); absent: a switch, which takes no value. */
  value?: string;
  commands: readonly Command[];
  /** What applies when the flag is not given, as a person reads it; absent: nothing (or "required"). */
  default?: string;
  /** One line. */
  description: string;
}

const choices = (values: readonly string[]) => values.join('|');

/** The commands that load a transcriber for recordings, and take its options. */
const LOADING: readonly Command[] = ['transcribe', 'ask', 'live', 'batch'];

export const FLAGS: readonly FlagSpec[] = [
  {
    name: 'help',
    short: 'h',
    commands: COMMANDS,
    description: "print the command's usage and flags, and exit",
  },
  {
    name: 'model',
    value: 'DIR',
    commands: [...LOADING, 'worker'],
    default: 'public/models/wnw-ref',
    description: 'model folder: our own, or a Hugging Face folder of Voxtral, Qwen2-Audio or Qwen2.5-Omni',
  },
  {
    name: 'policy',
    value: choices(POLICIES),
    commands: LOADING,
    default: 'wnw',
    description:
      "KV cache policy; wnw and audiokv need the folder's heads.json (wnw calibrate writes it): without --policy, a folder with none runs full",
  },
  {
    name: 'budget',
    value: 'R',
    commands: LOADING,
    default: '0.2',
    description: "target r_GPU, the share of the audio's KV cache kept on the GPU, in (0, 1]; full ignores it",
  },
  {
    name: 'backend',
    value: choices(BACKENDS),
    commands: [...LOADING, 'worker', 'calibrate'],
    default: 'auto',
    description: 'auto takes a hardware GPU through WebGPU when there is one, else the CPU, and says which',
  },
  {
    name: 'kv',
    value: choices(KV_PRECISIONS),
    commands: LOADING,
    default: 'f32',
    description: 'precision of the KV cache',
  },
  {
    name: 'weights',
    value: choices(WEIGHT_FORMATS),
    commands: LOADING,
    default: 'q4 for a Hugging Face folder, its own for a converted one, f32 for ours',
    description: "the decoder's weight format",
  },
  {
    name: 'audio-weights',
    value: choices(WEIGHT_FORMATS),
    commands: LOADING,
    default: "f16 beside a q4 decoder, else the decoder's",
    description: "weight format of a Hugging Face audio tower's Linears",
  },
  {
    name: 'audio-encoder',
    value: choices(AUDIO_ENCODERS),
    commands: LOADING,
    default: 'the ONNX graph when the folder has one, else the audio tower',
    description: "a Hugging Face folder's audio encoder: onnx makes a missing graph an error",
  },
  {
    name: 'language',
    value: 'CODE|none',
    commands: LOADING,
    default: 'none',
    description: 'language of the speech, 2 or 3 letters (en, yue); none lets the model detect it',
  },
  {
    name: 'task',
    value: choices(PROMPT_TASKS),
    commands: ['transcribe', 'batch'],
    default: 'transcribe',
    description: 'translate needs --target-language and a Hugging Face model whose prompt has a translation',
  },
  {
    name: 'target-language',
    value: 'CODE',
    commands: ['transcribe', 'batch'],
    description: 'the language --task translate translates into (de, fr)',
  },
  {
    name: 'format',
    value: choices(OUTPUT_FORMATS),
    commands: ['transcribe'],
    default: 'txt',
    description: 'the text; json: text, dated words and stats; srt or vtt: subtitles from the dated words',
  },
  {
    name: 'json',
    commands: ['transcribe'],
    description: 'the same as --format json',
  },
  {
    name: 'json',
    commands: ['ask'],
    description: "print each request's text, positions reused and prefilled and ms, and the stats",
  },
  {
    name: 'json',
    commands: ['live'],
    description: 'print { text, stats } at the end instead of the text as it is committed',
  },
  {
    name: 'simulate',
    value: 'FILE',
    commands: ['live'],
    description: "feed FILE's audio as if spoken, instead of 16 kHz mono s16le PCM from stdin",
  },
  {
    name: 'speed',
    value: 'N',
    commands: ['live'],
    description: 'with --simulate: feed at N times real time, not waiting for the ticks',
  },
  {
    name: 'tick',
    value: 'S',
    commands: ['live'],
    default: '2',
    description: 'seconds of new audio between two hypotheses',
  },
  {
    name: 'window',
    value: 'S',
    commands: ['live'],
    default: '12',
    description: 'seconds of audio a hypothesis attends at most, at least twice --tick',
  },
  {
    name: 'out',
    value: 'DIR',
    commands: ['batch'],
    description: 'the folder the outputs go to (required, except with --status)',
  },
  {
    name: 'format',
    value: choices(OUTPUT_FORMATS),
    commands: ['batch'],
    default: 'json',
    description: "each recording's output: json (text, dated words, stats), txt, srt or vtt",
  },
  {
    name: 'queue',
    value: 'redis://HOST:PORT/NAME',
    commands: ['batch'],
    description: 'enqueue the recordings on this Redis queue for wnw worker, instead of transcribing here',
  },
  {
    name: 'status',
    commands: ['batch'],
    description: "with --queue and no inputs: print the queue's counts, throughput and failures",
  },
  {
    name: 'attempts',
    value: 'N',
    commands: ['batch'],
    default: '3',
    description: 'with --queue: runs of a job whose failure is transient',
  },
  {
    name: 'backoff',
    value: 'S',
    commands: ['batch'],
    default: '30',
    description: 'with --queue: seconds before the first retry, doubling each retry',
  },
  {
    name: 'queue',
    value: 'redis://HOST:PORT/NAME',
    commands: ['worker'],
    description: 'the Redis queue to take jobs from (required)',
  },
  {
    name: 'concurrency',
    value: 'N',
    commands: ['worker'],
    default: '1',
    description: 'jobs run at once (1 to 64), each in its own thread with its own copy of the model',
  },
  {
    name: 'lock-duration',
    value: 'S',
    commands: ['worker'],
    default: '30',
    description: "seconds a job's lock lasts unrenewed: a dead worker's job runs again after it",
  },
  {
    name: 'exit-when-idle',
    commands: ['worker'],
    description: 'exit once nothing is waiting, running or waiting to retry',
  },
  {
    name: 'out',
    value: 'DIR',
    commands: ['worker'],
    description: "the only folder outputs go to (required): a job's own out must be this folder or inside it",
  },
  {
    name: 'input-root',
    value: 'DIR',
    commands: ['worker'],
    description: 'only read job files inside DIR (symlinks resolved); set it wherever others can enqueue',
  },
  {
    name: 'quant',
    value: choices(WEIGHT_FORMATS),
    commands: ['convert'],
    default: 'q4',
    description: "the format the decoder's weights are packed in",
  },
  {
    name: 'model',
    value: 'DIR',
    commands: ['calibrate'],
    description: 'the model folder to calibrate (required)',
  },
  {
    name: 'clips',
    value: 'DIR',
    commands: ['calibrate'],
    default: 'calibration-data',
    description: 'the calibration clips',
  },
  {
    name: 'limit',
    value: 'N',
    commands: ['calibrate'],
    default: '8',
    description: 'calibrate on the first N clips',
  },
  {
    name: 'out',
    value: 'FILE',
    commands: ['calibrate'],
    default: 'DIR/heads.json',
    description: 'where heads.json is written; a stopped run resumes from FILE.partial.json',
  },
  {
    name: 'estimator',
    value: 'answer-path|direct-path|finite-difference',
    commands: ['calibrate'],
    default: 'answer-path',
    description:
      'how the Head Sensitivity is estimated: answer-path, one forward and a backward of the answer rows a clip; direct-path, two forwards a clip, the direct path to the LM head only; finite-difference, M random directions per KV head (both on the CPU reference)',
  },
  {
    name: 'directions',
    value: 'M',
    commands: ['calibrate'],
    default: '4',
    description: 'random directions per head for the finite-difference estimate',
  },
  {
    name: 'block',
    value: 'N',
    commands: ['calibrate'],
    default: "all of a clip's",
    description: 'audio positions perturbed together',
  },
  {
    name: 'language',
    value: 'CODE',
    commands: ['calibrate'],
    default: 'none',
    description: 'language of the clips, for a model whose prompt names it',
  },
  {
    name: 'compare',
    value: 'HEADS.json',
    commands: ['calibrate'],
    description: "print the Spearman correlation of the two files' HS, VS and VS x HS",
  },
];

/** A command's rows, in the table's order. */
export function flagsOf(command: Command): FlagSpec[] {
  return FLAGS.filter((f) => f.commands.includes(command));
}

/**
 * What a command's parser takes from the table: the flag names it knows and those of them
 * that are switches. `--help` is answered before parsing (main.ts), so it is not among them.
 */
export function parserFlags(command: Command): { known: string[]; switches: string[] } {
  const rows = flagsOf(command).filter((f) => f.name !== 'help');
  return { known: rows.map((f) => f.name), switches: rows.filter((f) => f.value === undefined).map((f) => f.name) };
}
