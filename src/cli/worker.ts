/** `wnw worker --queue URL`: runs an archive's queued jobs on this machine (src/archive/queue-worker.ts). */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { CliIo } from './file-run.js';
import { UsageError, commandArgs, defaultModelDir, parseBackend, type BackendChoice } from './args.js';
import { parseQueueUrl } from '../archive/queue-url.js';
import { usageLine } from './help.js';

export const WORKER_USAGE = usageLine('worker');

export interface WorkerArgs {
  queue: string;
  /** Every output goes under this folder; a job's own `out` may only name a sub-folder of it. */
  out: string;
  /** Where set, every recording a job names must be under this folder. */
  inputRoot?: string;
  model: string;
  backend: BackendChoice;
  concurrency: number;
  lockSeconds: number;
  exitWhenIdle: boolean;
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function parseWorkerArgs(argv: string[], cwd = process.cwd()): WorkerArgs {
  const { flags, positional } = commandArgs('worker', argv);
  if (positional.length)
    throw new UsageError(`wnw worker takes no inputs (they come from the queue), got "${positional[0]}"`);
  const queue = flags.get('queue');
  if (queue === undefined) throw new UsageError('missing --queue redis://HOST:PORT/NAME');
  parseQueueUrl(queue);
  // A job's paths are whatever was written to Redis: the worker, not the job, says where outputs may go.
  const out = flags.get('out');
  if (out === undefined)
    throw new UsageError(
      'missing --out DIR, the folder the outputs go to (the --out the archive was enqueued with, on the shared folder)',
    );
  const inputRoot = flags.get('input-root');
  for (const [flag, dir] of [
    ['out', out],
    ['input-root', inputRoot],
  ] as const)
    if (dir !== undefined && !isFolder(resolve(cwd, dir)))
      throw new UsageError(`--${flag} ${dir}: no such folder: create it, or mount the shared folder there`);
  const concurrency = Number(flags.get('concurrency') ?? '1');
  if (!(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 64))
    throw new UsageError(`--concurrency takes a whole number from 1 to 64, got "${flags.get('concurrency')}"`);
  const lock = Number(flags.get('lock-duration') ?? '30');
  if (!(Number.isFinite(lock) && lock >= 1))
    throw new UsageError(`--lock-duration takes seconds, at least 1, got "${flags.get('lock-duration')}"`);
  return {
    queue,
    out: resolve(cwd, out),
    ...(inputRoot !== undefined ? { inputRoot: resolve(cwd, inputRoot) } : {}),
    model: flags.has('model') ? resolve(cwd, flags.get('model')!) : defaultModelDir(),
    backend: parseBackend(flags.get('backend') ?? 'auto'),
    concurrency,
    lockSeconds: lock,
    exitWhenIdle: flags.get('exit-when-idle') === 'true',
  };
}

export async function workerCommand(args: WorkerArgs, io: CliIo): Promise<number> {
  const { runQueueWorker } = await import('../archive/queue-worker.js');
  // SIGTERM is how Kubernetes and systemd stop a worker: finish the running jobs (within the
  // grace period), then exit; a second SIGTERM, or Ctrl-C twice, stops at once.
  const stop = new AbortController();
  const stopNow = new AbortController();
  const onSignal = () => (stop.signal.aborted ? stopNow : stop).abort();
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const graceful = await runQueueWorker(parseQueueUrl(args.queue), {
      model: args.model,
      backend: args.backend,
      out: args.out,
      ...(args.inputRoot !== undefined ? { inputRoot: args.inputRoot } : {}),
      concurrency: args.concurrency,
      lockSeconds: args.lockSeconds,
      exitWhenIdle: args.exitWhenIdle,
      log: (line) => io.stderr(`wnw worker: ${line}\n`),
      signal: stop.signal,
      stopNow: stopNow.signal,
    });
    return graceful ? 0 : 1;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
