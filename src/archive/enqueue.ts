/**
 * `wnw batch ... --queue URL`: one BullMQ job per recording that has no finished output. The
 * job's id is the recording's content hash and the options' hash (with the output's name and
 * folder), so enqueueing the same archive again, from this machine or another, adds nothing that
 * is already queued, running or done, while a changed recording or changed options make a new job.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Queue } from 'bullmq';
import { WnwError } from '../errors.js';
import type { RecordingJob } from './job.js';
import { doneRecord } from './output.js';
import type { QueueAddress } from './queue-url.js';

export interface EnqueueOptions {
  /** Tries per job for transient failures (a lost device, a worker that died); bad input fails once whatever this is. */
  attempts: number;
  /** The first retry's delay; each next one doubles it. */
  backoffSeconds: number;
  report: (line: string) => void;
}

export interface EnqueueSummary {
  added: number;
  /** Already in the queue (waiting, running, done or retrying): left as they are. */
  queued: number;
  /** Failed for good before: put back to run again (a transient cause may have passed). */
  retried: number;
  /** Their output is in --out already with the same options. */
  done: number;
  /** Could not be read here (reported one by one): not enqueued. */
  unreadable: number;
}

async function contentHash(file: string): Promise<string> {
  const h = createHash('sha256');
  try {
    for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  } catch (e) {
    throw new WnwError('BAD_ARGUMENT', `cannot read ${file}: ${(e as Error).message}`);
  }
  return h.digest('hex');
}

/** Letters, digits and '-' only: BullMQ reserves ':' in ids, and an id that reads as an integer. */
export async function jobId(job: RecordingJob): Promise<string> {
  const where = createHash('sha256').update(`${job.optionsHash}\0${job.out}\0${job.name}`).digest('hex');
  return `r${(await contentHash(job.file)).slice(0, 32)}-${where.slice(0, 24)}`;
}

export async function enqueue(
  address: QueueAddress,
  jobs: readonly RecordingJob[],
  o: EnqueueOptions,
): Promise<EnqueueSummary> {
  const queue = new Queue<RecordingJob>(address.name, { connection: address.connection });
  const s: EnqueueSummary = { added: 0, queued: 0, retried: 0, done: 0, unreadable: 0 };
  try {
    for (const job of jobs) {
      if (await doneRecord(job)) {
        s.done++;
        continue;
      }
      let id: string;
      try {
        id = await jobId(job);
      } catch (e) {
        if (!(e instanceof WnwError)) throw e;
        s.unreadable++;
        o.report(`${job.name}: ${e.code}: ${e.message}`);
        continue;
      }
      const existing = await queue.getJob(id);
      if (existing) {
        if ((await existing.getState()) === 'failed') {
          await existing.retry('failed');
          s.retried++;
          o.report(`${job.name}: failed before (${existing.failedReason}); queued again`);
        } else s.queued++;
        continue;
      }
      await queue.add(job.name, job, {
        jobId: id,
        attempts: o.attempts,
        backoff: { type: 'exponential', delay: o.backoffSeconds * 1000 },
      });
      s.added++;
    }
  } finally {
    await queue.close();
  }
  return s;
}
