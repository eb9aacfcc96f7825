/**
 * `wnw batch IN... --out DIR` (transcribe an archive here), `wnw batch IN... --out DIR --queue URL`
 * (enqueue it for `wnw worker`s on any number of machines) and `wnw batch --queue URL --status`.
 * docs/archives.md has the rest.
 */
import { resolve } from 'node:path';
import type { CliIo } from './file-run.js';
import {
  OUTPUT_FORMATS,
  UsageError,
  defaultModelDir,
  defaultWeightFormat,
  parseAudioEncoder,
  parseBackend,
  parseBudget,
  parseKvPrecision,
  parsePolicy,
  parseWeightFormat,
  commandArgs,
  type BackendChoice,
  type OutputFormat,
} from './args.js';
import { isLanguageOption, LANGUAGE_FORMS } from '../model/text/language.js';
import { archiveInputs } from '../archive/inputs.js';
import { optionsHash, type LoadSettings, type RecordingJob, type RecordingOptions } from '../archive/job.js';
import { modelIdentity } from '../archive/model-identity.js';
import { archiveProgressLine } from '../archive/progress.js';
import { parseQueueUrl } from '../archive/queue-url.js';
import { usageLine } from './help.js';

export const BATCH_USAGE = usageLine('batch');

export interface BatchArgs {
  inputs: string[];
  out: string;
  format: OutputFormat;
  options: RecordingOptions;
  load: LoadSettings;
  model: string;
  backend: BackendChoice;
  queue?: string;
  status: boolean;
  attempts: number;
  backoffSeconds: number;
}

function positiveInteger(flag: string, s: string | undefined, fallback: number): number {
  if (s === undefined) return fallback;
  const n = Number(s);
  if (!(Number.isInteger(n) && n >= 1))
    throw new UsageError(`--${flag} takes a whole number of at least 1, got "${s}"`);
  return n;
}

export function parseBatchArgs(argv: string[], cwd = process.cwd()): BatchArgs {
  const { flags, positional } = commandArgs('batch', argv);
  const status = flags.get('status') === 'true';
  const queue = flags.get('queue');
  if (queue !== undefined) parseQueueUrl(queue);
  if (status) {
    if (queue === undefined) throw new UsageError('--status reports on a queue: give --queue redis://HOST:PORT/NAME');
    if (positional.length) throw new UsageError('--status takes no inputs');
  } else {
    if (!positional.length)
      throw new UsageError('missing the inputs: audio files, folders or manifests (.txt, .jsonl)');
    if (!flags.has('out')) throw new UsageError('missing --out DIR, the folder the outputs go to');
  }
  for (const f of ['attempts', 'backoff'])
    if (flags.has(f) && queue === undefined) throw new UsageError(`--${f} goes with --queue (retries are the queue's)`);
  const format = flags.get('format') ?? 'json';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}, got "${format}"`);
  const language = flags.get('language');
  if (language !== undefined && !isLanguageOption(language))
    throw new UsageError(`--language takes ${LANGUAGE_FORMS}, got "${language}"`);
  const task = flags.get('task');
  const target = flags.get('target-language');
  if (task !== undefined && task !== 'transcribe' && task !== 'translate')
    throw new UsageError(`--task must be transcribe or translate, got "${task}"`);
  if (task === 'translate' && (target === undefined || target === 'none' || !isLanguageOption(target)))
    throw new UsageError('--task translate needs --target-language, a language code of 2 or 3 letters such as "de"');
  if (task !== 'translate' && target !== undefined)
    throw new UsageError('--target-language goes with --task translate');
  const model = flags.has('model') ? resolve(cwd, flags.get('model')!) : defaultModelDir();
  const weights = flags.get('weights');
  const audioWeights = flags.get('audio-weights');
  const encoder = flags.get('audio-encoder');
  return {
    inputs: positional,
    out: resolve(cwd, flags.get('out') ?? '.'),
    format: format as OutputFormat,
    options: {
      policy: parsePolicy(flags.get('policy') ?? 'wnw'),
      budget: parseBudget(flags.get('budget') ?? '0.2'),
      ...(language !== undefined ? { language } : {}),
      ...(task !== undefined ? { task: task as 'transcribe' | 'translate' } : {}),
      ...(target !== undefined ? { targetLanguage: target } : {}),
    },
    load: {
      kv: parseKvPrecision(flags.get('kv') ?? 'f32'),
      weights: weights !== undefined ? parseWeightFormat(weights) : defaultWeightFormat(model),
      ...(encoder !== undefined ? { audioEncoder: parseAudioEncoder(encoder) } : {}),
      ...(audioWeights !== undefined ? { audioWeights: parseWeightFormat(audioWeights, 'audio-weights') } : {}),
    },
    model,
    backend: parseBackend(flags.get('backend') ?? 'auto'),
    ...(queue !== undefined ? { queue } : {}),
    status,
    attempts: positiveInteger('attempts', flags.get('attempts'), 3),
    backoffSeconds: positiveInteger('backoff', flags.get('backoff'), 30),
  };
}

/** The inputs as jobs: the command line's options under each manifest line's own. */
export function batchJobs(args: BatchArgs, cwd = process.cwd()): RecordingJob[] {
  const identity = modelIdentity(args.model);
  return archiveInputs(args.inputs, cwd).map((input) => {
    const options: RecordingOptions = { ...args.options, ...input.options };
    if (options.task !== 'translate') delete options.targetLanguage;
    return {
      file: input.file,
      name: input.name,
      out: args.out,
      format: args.format,
      options,
      load: args.load,
      modelIdentity: identity,
      optionsHash: optionsHash(options, args.format, args.load, identity),
    };
  });
}

export async function batchCommand(args: BatchArgs, io: CliIo): Promise<number> {
  if (args.status) {
    const { queueStatus, formatQueueStatus } = await import('../archive/queue-status.js');
    const { checkRedisReachable } = await import('../archive/redis-reachable.js');
    const address = parseQueueUrl(args.queue!);
    await checkRedisReachable(address);
    io.stdout(formatQueueStatus(address.shown, await queueStatus(address)));
    return 0;
  }
  const jobs = batchJobs(args);
  if (args.queue !== undefined) {
    const { enqueue } = await import('../archive/enqueue.js');
    const { checkRedisReachable } = await import('../archive/redis-reachable.js');
    const address = parseQueueUrl(args.queue);
    await checkRedisReachable(address);
    const s = await enqueue(address, jobs, {
      attempts: args.attempts,
      backoffSeconds: args.backoffSeconds,
      report: (line) => io.stderr(`wnw: ${line}\n`),
    });
    io.stdout(
      `${address.shown}: ${s.added} enqueued, ${s.queued} already in the queue, ${s.retried} failed before and queued again, ` +
        `${s.done} already done in ${args.out}${s.unreadable ? `, ${s.unreadable} unreadable (above)` : ''}\n`,
    );
    return s.unreadable ? 1 : 0;
  }
  const { runBatch } = await import('../archive/batch.js');
  let drawn = false;
  const s = await runBatch(jobs, {
    load: async () => {
      const asr = await io.load({
        model: args.model,
        policy: args.options.policy,
        budget: args.options.budget,
        backend: args.backend,
        kvPrecision: args.load.kv,
        weightFormat: args.load.weights,
        ...(args.load.audioEncoder ? { audioEncoder: args.load.audioEncoder } : {}),
        ...(args.load.audioWeights ? { audioWeightFormat: args.load.audioWeights } : {}),
      });
      io.stderr(`wnw: backend ${asr.backend}${args.backend === 'auto' ? ' (auto)' : ''}; ${jobs.length} recordings\n`);
      return asr;
    },
    report: (line, progress) => {
      // A terminal gets one redrawn progress line under the per-file lines; a log gets both as lines.
      if (io.tty) io.stderr(`${drawn ? '\r\x1b[2K' : ''}wnw: ${line}\n${archiveProgressLine(progress)}`);
      else io.stderr(`wnw: ${line} (${archiveProgressLine(progress)})\n`);
      drawn = io.tty;
    },
    ...(io.signal ? { signal: io.signal } : {}),
  });
  if (drawn) io.stderr('\r\x1b[2K');
  const lines = [
    `${s.transcribed} transcribed, ${s.skipped} already done, ${s.failed} failed` +
      (s.interrupted
        ? `, ${s.total - s.transcribed - s.skipped - s.failed} not reached (interrupted: run the same command again to resume)`
        : '') +
      `; outputs in ${args.out}`,
    ...s.failures.map((f) => `failed: ${f.job.file}: ${f.code}: ${f.message}`),
  ];
  io.stdout(`${lines.join('\n')}\n`);
  return s.interrupted ? 130 : s.failed ? 1 : 0;
}
