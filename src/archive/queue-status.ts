/**
 * `wnw batch --queue URL --status`: how many jobs are done, failed, running and waiting, the
 * failures with their typed errors, and the throughput of the jobs done so far.
 */
import { Queue } from 'bullmq';
import { printable } from './printable.js';
import { clock } from './progress.js';
import type { RecordingJob } from './job.js';
import type { QueueAddress } from './queue-url.js';
import type { RecordingDone } from './transcribe-recording.js';

export interface QueueStatus {
  done: number;
  failed: number;
  active: number;
  waiting: number;
  /** Waiting out a retry's backoff. */
  delayed: number;
  failures: { name: string; file: string; reason: string; attempts: number }[];
  /** Over the done jobs: hours of audio, and the wall time from the first start to the last finish. */
  audioSeconds: number;
  spanSeconds: number;
}

/** Failures listed in full up to this many; the count covers all. */
const FAILURES_SHOWN = 50;
/** Done jobs read for the throughput; the count covers all. */
const DONE_READ = 10_000;

export async function queueStatus(address: QueueAddress): Promise<QueueStatus> {
  const queue = new Queue<RecordingJob, RecordingDone>(address.name, { connection: address.connection });
  try {
    const c = await queue.getJobCounts('completed', 'failed', 'active', 'waiting', 'prioritized', 'delayed');
    const failed = await queue.getFailed(0, FAILURES_SHOWN - 1);
    const done = await queue.getCompleted(0, DONE_READ - 1);
    let audioSeconds = 0;
    let first = Infinity;
    let last = -Infinity;
    for (const j of done) {
      audioSeconds += j.returnvalue?.audioSeconds ?? 0;
      if (j.processedOn) first = Math.min(first, j.processedOn);
      if (j.finishedOn) last = Math.max(last, j.finishedOn);
    }
    return {
      done: c.completed ?? 0,
      failed: c.failed ?? 0,
      active: c.active ?? 0,
      waiting: (c.waiting ?? 0) + (c.prioritized ?? 0),
      delayed: c.delayed ?? 0,
      // Any job's data, a malformed one's included: what a worker refused is listed, not choked on.
      failures: failed.map((j) => ({
        name: printable(j.name),
        file: printable((j.data as { file?: unknown } | null)?.file ?? '?'),
        reason: printable(j.failedReason),
        attempts: j.attemptsMade,
      })),
      audioSeconds,
      spanSeconds: last > first ? (last - first) / 1000 : 0,
    };
  } finally {
    await queue.close();
  }
}

export function formatQueueStatus(shown: string, s: QueueStatus): string {
  const lines = [
    `${shown}: ${s.done} done, ${s.failed} failed, ${s.active} running, ${s.waiting} waiting, ${s.delayed} waiting to retry`,
  ];
  if (s.done)
    lines.push(
      `throughput: ${(s.audioSeconds / 3600).toFixed(2)} h of audio in ${clock(s.spanSeconds)}` +
        (s.spanSeconds > 0 ? ` (${(s.audioSeconds / s.spanSeconds).toFixed(1)} h of audio per hour)` : ''),
    );
  for (const f of s.failures)
    lines.push(`failed: ${f.name} (${f.file}, ${f.attempts} attempt${f.attempts === 1 ? '' : 's'}): ${f.reason}`);
  if (s.failed > s.failures.length) lines.push(`... and ${s.failed - s.failures.length} more failures`);
  return `${lines.join('\n')}\n`;
}
