/**
 * An archive's outputs on disk. Each is written to a temporary file and renamed into place, so a
 * reader (or a run killed halfway) sees the whole output or none; a done record beside it, in
 * OUT/.wnw/, names the options' hash it was made with and is written last, so a rerun skips
 * exactly the outputs that are complete and made with the same options. A job run twice (a queue
 * delivers at least once) renames the same content twice and leaves one output.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RecordingJob } from './job.js';

/** Where done records and temporary files live: out of the way of the outputs. */
export const RECORD_DIR = '.wnw';

export interface DoneRecord {
  source: string;
  optionsHash: string;
  audioSeconds: number;
  /** Seconds the transcription took, for throughput. */
  seconds: number;
  finishedAt: string;
}

export function outputPath(job: Pick<RecordingJob, 'out' | 'name' | 'format'>): string {
  return join(job.out, `${job.name}.${job.format}`);
}

export function recordPath(job: Pick<RecordingJob, 'out' | 'name' | 'format'>): string {
  return join(job.out, RECORD_DIR, `${job.name}.${job.format}.json`);
}

/**
 * Writes `text` to `path` through a temporary file in the same folder (a rename is atomic only
 * within one file system). The temporary name starts with a dot and ends in .tmp: one left by a
 * process killed between write and rename is never taken for an output and may be deleted.
 */
export async function writeAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = join(dirname(path), `.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, text);
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/** The done record of a job's output, or null where there is none (or it cannot be read: then the job runs again). */
export async function doneRecord(job: RecordingJob): Promise<DoneRecord | null> {
  try {
    const record = JSON.parse(await readFile(recordPath(job), 'utf8')) as DoneRecord;
    if (record.optionsHash !== job.optionsHash) return null;
    // The output itself must be there too: someone may have deleted it to have it redone.
    await stat(outputPath(job));
    return record;
  } catch {
    return null;
  }
}

/** Output first, record last: a record always stands for a complete output. */
export async function writeOutput(
  job: RecordingJob,
  text: string,
  done: Omit<DoneRecord, 'finishedAt'>,
): Promise<void> {
  await writeAtomic(outputPath(job), text);
  const record: DoneRecord = { ...done, finishedAt: new Date().toISOString() };
  await writeAtomic(recordPath(job), `${JSON.stringify(record)}\n`);
}
