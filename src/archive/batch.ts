/**
 * `wnw batch` on one machine: the model loaded once, then every recording in order; finished
 * outputs (same options' hash) skipped, so a run interrupted by Ctrl-C, a crash or a reboot is
 * resumed by running the same command again. A failed recording is reported with its typed
 * error and the run goes on with the next.
 */
import type { Transcriber } from '../index.js';
import type { ArchiveProgress } from './progress.js';
import type { RecordingJob } from './job.js';
import { doneRecord } from './output.js';
import { transcribeRecording } from './transcribe-recording.js';

export interface BatchFailure {
  job: RecordingJob;
  code: string;
  message: string;
}

export interface BatchSummary extends ArchiveProgress {
  failures: BatchFailure[];
  /** Stopped by the signal before the last recording: run again to resume. */
  interrupted: boolean;
}

export interface BatchIo {
  /** Called once, before the first recording that is not already done. */
  load: () => Promise<Transcriber>;
  /** A line about one recording (done, skipped, failed) with the progress after it. */
  report: (line: string, progress: ArchiveProgress) => void;
  signal?: AbortSignal;
}

const errorCode = (e: unknown) => (e as { code?: unknown }).code;

export async function runBatch(jobs: readonly RecordingJob[], io: BatchIo): Promise<BatchSummary> {
  const s: BatchSummary = {
    total: jobs.length,
    transcribed: 0,
    skipped: 0,
    failed: 0,
    audioSeconds: 0,
    seconds: 0,
    failures: [],
    interrupted: false,
  };
  let asr: Transcriber | undefined;
  try {
    for (const [i, job] of jobs.entries()) {
      if (io.signal?.aborted) {
        s.interrupted = true;
        break;
      }
      const at = `[${i + 1}/${jobs.length}] ${job.name}`;
      if (await doneRecord(job)) {
        s.skipped++;
        io.report(`${at}: already done`, s);
        continue;
      }
      try {
        asr ??= await io.load();
        const done = await transcribeRecording(asr, job, { signal: io.signal });
        s.transcribed++;
        s.audioSeconds += done.audioSeconds;
        s.seconds += done.seconds;
        io.report(`${at}: ${done.audioSeconds.toFixed(1)} s of audio in ${done.seconds.toFixed(1)} s`, s);
      } catch (e) {
        if (errorCode(e) === 'CANCELLED' || io.signal?.aborted) {
          s.interrupted = true;
          break;
        }
        // A model that cannot load fails every recording the same way: stop at the first.
        if (!asr) throw e;
        const code = typeof errorCode(e) === 'string' ? (errorCode(e) as string) : 'ERROR';
        const message = (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ');
        s.failed++;
        s.failures.push({ job, code, message });
        io.report(`${at}: failed: ${code}: ${message}`, s);
      }
    }
  } finally {
    asr?.dispose();
  }
  return s;
}
