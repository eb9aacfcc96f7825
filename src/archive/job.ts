/**
 * One recording of an archive and what is done to it: where it is, where its output goes, the
 * options that decide the output, and their hash. The same job runs in `wnw batch` on one
 * machine and in a queue worker on many; the hash is what makes a finished output skippable and
 * a queue job idempotent.
 */
import { createHash } from 'node:crypto';
import type { OutputFormat } from '../output-formats.js';
import type { PolicyName } from '../index.js';
import type { KvPrecision, WeightFormat } from '../index.js';

/** Options a manifest line may set for its recording; the command line sets them for the rest. */
export interface RecordingOptions {
  policy: PolicyName;
  budget: number;
  language?: string;
  task?: 'transcribe' | 'translate';
  targetLanguage?: string;
}

/** Options the model is loaded with: the same for every recording of a run. */
export interface LoadSettings {
  kv: KvPrecision;
  weights: WeightFormat;
  audioEncoder?: 'onnx' | 'audio-tower';
  audioWeights?: WeightFormat;
}

export interface RecordingJob {
  /** Absolute path of the recording: on a queue, the same path on every worker's machine (a shared folder). */
  file: string;
  /** The output's path under `out` without its extension, '/'-separated. */
  name: string;
  out: string;
  format: OutputFormat;
  options: RecordingOptions;
  load: LoadSettings;
  /** model-identity.ts: the model the outputs must come from. */
  modelIdentity: string;
  optionsHash: string;
}

/** Sorted keys, so the same options hash the same however they were assembled. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/**
 * What the output depends on besides the audio. The backend is left out: it says where the work
 * ran, and an archive started on a GPU machine may be finished on a CPU one.
 */
export function optionsHash(
  options: RecordingOptions,
  format: OutputFormat,
  load: LoadSettings,
  modelIdentity: string,
): string {
  return createHash('sha256').update(canonical({ options, format, load, modelIdentity })).digest('hex');
}
