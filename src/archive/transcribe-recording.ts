/**
 * One archive job on a loaded transcriber: read, decode, transcribe, write the output as
 * `wnw transcribe --format` prints it, and its done record. Shared by `wnw batch` and the queue
 * worker's thread, so both write the same bytes for the same recording.
 */
import { readFile } from 'node:fs/promises';
import { toMono16k } from '../audio/decode.js';
import { formatResult } from '../output-formats.js';
import { WnwError } from '../errors.js';
import type { ProgressEvent, Transcriber } from '../index.js';
import type { RecordingJob } from './job.js';
import { writeOutput } from './output.js';

export interface RecordingDone {
  audioSeconds: number;
  seconds: number;
}

async function readRecording(file: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(file));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (e as Error).message;
    throw new WnwError(
      'BAD_ARGUMENT',
      `cannot read ${file}: ${why}. Check the path; a queue's workers must see the recordings at the path they were enqueued with (a shared folder).`,
    );
  }
}

/**
 * Throws the typed error of a recording that could not be transcribed, a partial transcript's
 * included (a cancelled run, a lost device): no output is written for it, so it is redone.
 */
export async function transcribeRecording(
  asr: Transcriber,
  job: RecordingJob,
  call: { signal?: AbortSignal; onProgress?: (e: ProgressEvent) => void } = {},
): Promise<RecordingDone> {
  const started = performance.now();
  const audio = await toMono16k(await readRecording(job.file));
  const o = job.options;
  const result = await asr.transcribe(audio, {
    policy: o.policy,
    budget: o.budget,
    ...(o.language !== undefined ? { language: o.language } : {}),
    ...(o.task ? { task: o.task } : {}),
    ...(o.targetLanguage ? { targetLanguage: o.targetLanguage } : {}),
    ...(call.signal ? { signal: call.signal } : {}),
    ...(call.onProgress ? { onProgress: call.onProgress } : {}),
  });
  if (result.error) throw result.error;
  const audioSeconds = result.stats.audioSeconds;
  const seconds = (performance.now() - started) / 1000;
  await writeOutput(job, formatResult(result, { format: job.format, budget: o.budget }), {
    source: job.file,
    optionsHash: job.optionsHash,
    audioSeconds,
    seconds,
  });
  return { audioSeconds, seconds };
}
