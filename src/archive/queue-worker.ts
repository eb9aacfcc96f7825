/**
 * `wnw worker --queue URL`: takes jobs from the queue and transcribes them on this machine, one
 * transcription thread per job it runs at once (--concurrency), each keeping its model loaded.
 * The event loop here only talks to Redis, so BullMQ renews each job's lock every half
 * --lock-duration however long a transcription takes; a worker that dies (power, SIGKILL, OOM)
 * stops renewing, and after --lock-duration another worker's stalled-job check puts its jobs
 * back in the queue. Bad input (BAD_AUDIO, BAD_ARGUMENT, CONTEXT_TOO_LONG) fails once; anything
 * else is retried with backoff as the job's attempts allow. A job's data is whatever was written
 * to Redis: queued-job.ts checks it and keeps its paths inside --out (and --input-root) first.
 */
import { Worker as ThreadWorker } from 'node:worker_threads';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { BackendChoice } from '../option-values.js';
import { deserializeError } from '../worker/client.js';
import type { RecordingJob } from './job.js';
import { modelIdentity } from './model-identity.js';
import { doneRecord, outputPath } from './output.js';
import { printable } from './printable.js';
import { BadJobError, checkQueuedJob, workerFolders } from './queued-job.js';
import type { QueueAddress } from './queue-url.js';
import type { FromThread, ToThread } from './thread-protocol.js';
import type { RecordingDone } from './transcribe-recording.js';

/** Failures that another try cannot mend: the recording or the job itself is wrong. */
export const NO_RETRY_CODES: readonly string[] = ['BAD_AUDIO', 'BAD_ARGUMENT', 'CONTEXT_TOO_LONG'];

export interface QueueWorkerOptions {
  model: string;
  backend: BackendChoice;
  /** The folder every output goes under: a job may name a sub-folder of it, never a path outside. */
  out: string;
  /** Where set, a job's recording must be under this folder (symlinks resolved). */
  inputRoot?: string;
  concurrency: number;
  /** BullMQ's lockDuration and stalledInterval: how soon a dead worker's job runs elsewhere. */
  lockSeconds: number;
  /** Stop once no job is waiting, running (on any worker) or waiting to retry. */
  exitWhenIdle: boolean;
  log: (line: string) => void;
  /** Aborted (SIGTERM, Ctrl-C): take no new job, finish the running ones, stop. */
  signal?: AbortSignal;
  /** Aborted (the signal again): stop now; the running jobs run again elsewhere after the lock expires. */
  stopNow?: AbortSignal;
}

/**
 * The thread's module: under tsx (the CLI runs from its TypeScript sources) the thread registers
 * tsx first, since loader hooks are not inherited by worker threads on every Node version.
 */
function startThread(): ThreadWorker {
  const self = import.meta.url;
  if (!self.endsWith('.ts')) return new ThreadWorker(new URL('./transcription-thread.js', self));
  const thread = new URL('./transcription-thread.ts', self).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  return new ThreadWorker(
    `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(thread)}); });`,
    { eval: true },
  );
}

class TranscriptionThread {
  private thread = startThread();
  private pending?: {
    id: string;
    resolve: (d: RecordingDone) => void;
    reject: (e: Error) => void;
    progress: (p: number) => void;
  };
  dead = false;

  constructor() {
    this.thread.on('message', (m: FromThread) => {
      const p = this.pending;
      if (!p || m.id !== p.id) return;
      if (m.type === 'progress') p.progress(m.percent);
      else {
        this.pending = undefined;
        if (m.type === 'done') p.resolve(m.done);
        else p.reject(deserializeError(m.error));
      }
    });
    const died = (why: string) => {
      this.dead = true;
      const p = this.pending;
      this.pending = undefined;
      // Not a bad-input code: the job is retried, on this worker's next thread or another worker.
      p?.reject(new Error(`the transcription thread ${why}`));
    };
    this.thread.on('error', (e) => died(`failed: ${e.message}`));
    this.thread.on('exit', (code) => died(`exited (code ${code})`));
  }

  run(m: ToThread, progress: (percent: number) => void): Promise<RecordingDone> {
    return new Promise((resolve, reject) => {
      this.pending = { id: m.id, resolve, reject, progress };
      this.thread.postMessage(m);
    });
  }

  stop(): Promise<number> {
    return this.thread.terminate();
  }
}

const codeOf = (e: unknown) => {
  const c = (e as { code?: unknown }).code;
  return typeof c === 'string' ? c : 'ERROR';
};

/** Resolves with false when stopped by `stopNow` with jobs possibly running. */
export async function runQueueWorker(address: QueueAddress, o: QueueWorkerOptions): Promise<boolean> {
  const identity = modelIdentity(o.model);
  const folders = await workerFolders(o.out, o.inputRoot);
  const idle: TranscriptionThread[] = [];
  const all = new Set<TranscriptionThread>();
  const take = () => {
    let t: TranscriptionThread | undefined;
    while ((t = idle.pop()) && t.dead) all.delete(t);
    if (!t) all.add((t = new TranscriptionThread()));
    return t;
  };

  const processJob = async (job: Job<unknown, RecordingDone>): Promise<RecordingDone> => {
    const at = `job ${printable(job.id)} ${printable(job.name)}`;
    let data: RecordingJob;
    try {
      data = await checkQueuedJob(job.data, folders);
    } catch (e) {
      if (!(e instanceof BadJobError)) throw e;
      const why = `${e.code}: ${e.message}`;
      o.log(`${at}: failed: ${printable(why)} (bad input: not retried)`);
      throw new UnrecoverableError(why);
    }
    if (data.modelIdentity !== identity) {
      const why =
        `BAD_ARGUMENT: enqueued for another model than this worker's --model ${o.model} ` +
        '(model folders differ in config, heads or files): start the workers with the model the archive was enqueued with';
      o.log(`${at}: failed: ${why}`);
      throw new UnrecoverableError(why);
    }
    // Delivered again after a run that wrote its output but died before telling Redis: nothing to redo.
    const record = await doneRecord(data);
    if (record) {
      o.log(`${at}: already done (${printable(outputPath(data))})`);
      return { audioSeconds: record.audioSeconds, seconds: record.seconds };
    }
    o.log(`${at}: started (attempt ${job.attemptsMade + 1} of ${job.opts.attempts ?? 1})`);
    const thread = take();
    try {
      const done = await thread.run(
        { type: 'run', id: String(job.id), job: data, model: o.model, backend: o.backend },
        (p) => void job.updateProgress(p).catch(() => {}),
      );
      o.log(`${at}: done, ${done.audioSeconds.toFixed(1)} s of audio in ${done.seconds.toFixed(1)} s`);
      return done;
    } catch (e) {
      const code = codeOf(e);
      const message = `${code}: ${(e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ')}`;
      const final = NO_RETRY_CODES.includes(code);
      o.log(`${at}: failed: ${printable(message)}${final ? ' (bad input: not retried)' : ''}`);
      throw final ? new UnrecoverableError(message) : new Error(message);
    } finally {
      if (thread.dead) all.delete(thread);
      else idle.push(thread);
    }
  };

  const worker = new Worker<unknown, RecordingDone>(address.name, processJob, {
    connection: address.connection,
    concurrency: o.concurrency,
    lockDuration: o.lockSeconds * 1000,
    stalledInterval: o.lockSeconds * 1000,
    autorun: false,
  });
  // Redis down: BullMQ reconnects on its own; say so once per cause rather than at every retry.
  let lastError = '';
  const queueError = (e: Error) => {
    if (e.message !== lastError) o.log(`queue error (retrying): ${(lastError = e.message)}`);
  };
  worker.on('error', queueError);
  const counts = new Queue(address.name, { connection: address.connection });
  counts.on('error', queueError);

  let running = 0;
  worker.on('active', () => void running++);
  const settled = () => void (running = Math.max(0, running - 1));
  worker.on('completed', settled);
  worker.on('failed', settled);

  const graceful = await new Promise<boolean>((resolve) => {
    let stopping = false;
    const stop = (why: string) => {
      if (stopping) return;
      stopping = true;
      clearInterval(idleCheck);
      o.log(why);
      // Waits for the running jobs, and for Redis where it is down: the second signal is the way out.
      void worker.close().then(
        () => resolve(true),
        () => resolve(true),
      );
    };
    o.signal?.addEventListener(
      'abort',
      () => stop('stopping: finishing the running jobs (the signal again stops now)'),
      { once: true },
    );
    o.stopNow?.addEventListener(
      'abort',
      () => {
        o.log('stopping now: the running jobs run again elsewhere once their lock expires');
        clearInterval(idleCheck);
        resolve(false);
      },
      { once: true },
    );
    // Every worker watches the whole queue: a job running elsewhere may still come back (its worker dies).
    const idleCheck = setInterval(() => {
      if (!o.exitWhenIdle || running > 0) return;
      counts
        .getJobCounts('waiting', 'prioritized', 'active', 'delayed')
        .then((c) => {
          if (Object.values(c).every((n) => n === 0)) stop('queue empty: stopping');
        })
        .catch(() => {});
    }, 1000);
    o.log(
      `waiting for jobs on ${address.shown} (outputs under ${folders.out}` +
        `${folders.inputRootReal !== undefined ? `, recordings under ${folders.inputRootReal}` : ''}, ` +
        `concurrency ${o.concurrency}, lock ${o.lockSeconds} s)`,
    );
    void worker.run().catch((e: Error) => stop(`queue error: ${e.message}`));
  });
  await Promise.all([...all].map((t) => t.stop()));
  // Closing talks to Redis, which may be what is down when stopped now.
  if (graceful) await counts.close();
  return graceful;
}
