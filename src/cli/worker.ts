/** `wnw worker --queue URL`: runs an archive's queued jobs on this machine (src/archive/queue-worker.ts). */
import { resolve } from 'node:path';
import type { CliIo } from './file-run.js';
import { UsageError, commandArgs, defaultModelDir, parseBackend, type BackendChoice } from './args.js';
import { parseQueueUrl } from '../archive/queue-url.js';
import { usageLine } from './help.js';

export const WORKER_USAGE = usageLine('worker');

export interface WorkerArgs {
  queue: string;
  model: string;
  backend: BackendChoice;
  concurrency: number;
  lockSeconds: number;
  exitWhenIdle: boolean;
}

export function parseWorkerArgs(argv: string[], cwd = process.cwd()): WorkerArgs {
  const { flags, positional } = commandArgs('worker', argv);
  if (positional.length)
    throw new UsageError(`wnw worker takes no inputs (they come from the queue), got "${positional[0]}"`);
  // The flag table has --input-root for the queue worker's input check; until the worker
  // takes it, refusing it is safer than ignoring a limit on what the worker reads.
  if (flags.has('input-root'))
    throw new UsageError('--input-root is not supported by this wnw worker yet: run it without the flag');
  const queue = flags.get('queue');
  if (queue === undefined) throw new UsageError('missing --queue redis://HOST:PORT/NAME');
  parseQueueUrl(queue);
  const concurrency = Number(flags.get('concurrency') ?? '1');
  if (!(Number.isInteger(concurrency) && concurrency >= 1 && concurrency <= 64))
    throw new UsageError(`--concurrency takes a whole number from 1 to 64, got "${flags.get('concurrency')}"`);
  const lock = Number(flags.get('lock-duration') ?? '30');
  if (!(Number.isFinite(lock) && lock >= 1))
    throw new UsageError(`--lock-duration takes seconds, at least 1, got "${flags.get('lock-duration')}"`);
  return {
    queue,
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
