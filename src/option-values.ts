/**
 * Option values as people write them, on the command line, in an archive's manifests and in
 * an evaluation's policy specs: each parser takes the text and returns the value, and every
 * mistake is a UsageError whose message is one line a person can act on.
 */
import { KV_PRECISIONS } from './kv/precision.js';
import { WEIGHT_FORMATS } from './model/packed-weights.js';
import { checkPolicyOptions } from './policy/registry.js';
import { AUDIO_ENCODERS, type AudioEncoderChoice } from './model/hf/onnx-audio.js';
import { OUTPUT_FORMATS, type OutputFormat } from './output-formats.js';
import type { PolicyName } from './types.js';
import type { KvPrecision } from './kv/precision.js';
import type { WeightFormat } from './model/quant.js';

export const POLICIES = [
  'full',
  'wnw',
  'snapkv',
  'adakv',
  'audiokv',
  'arkvale',
  'h2o',
  'streaming',
  'quest',
] as const satisfies readonly PolicyName[];
// Fails to compile when a policy is added to PolicyName but not here.
const everyPolicy: [Exclude<PolicyName, (typeof POLICIES)[number]>] extends [never] ? true : false = true;
void everyPolicy;

export const BACKENDS = ['auto', 'webgpu', 'cpu'] as const;

export type BackendChoice = (typeof BACKENDS)[number];

export class UsageError extends Error {
  override name = 'UsageError';
}

export function parsePolicy(s: string): PolicyName {
  if (!(POLICIES as readonly string[]).includes(s))
    throw new UsageError(`unknown policy "${s}" (one of ${POLICIES.join(', ')})`);
  return s as PolicyName;
}

/** A policy with method, ablation or diagnosis options, as written on a command line: `wnw:ranking=voice:nVoice=8`. */
export interface PolicySpec {
  policy: PolicyName;
  /** For the policy's factory (as a transcriber's policyOptions: registry.forEvaluation); numbers and true/false are converted. */
  options: Record<string, string | number | boolean>;
  /** The options as written (`ranking=voice:nVoice=8`), '' for none: labels runs and table rows. */
  variant: string;
}

export function parsePolicySpec(s: string): PolicySpec {
  const [name, ...parts] = s.split(':');
  const policy = parsePolicy(name);
  const options: Record<string, string | number | boolean> = {};
  for (const part of parts) {
    const m = /^([A-Za-z]\w*)=([^=]+)$/.exec(part);
    if (!m) throw new UsageError(`policy option "${part}" in "${s}" is not key=value (e.g. wnw:ranking=voice)`);
    const v = m[2];
    options[m[1]] =
      v === 'true' ? true : v === 'false' ? false : v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v;
  }
  if (policy === 'full' && parts.length) throw new UsageError('the full cache takes no options');
  try {
    checkPolicyOptions(policy, options, 'evaluation');
  } catch (e) {
    throw new UsageError(`${(e as Error).message} (in "${s}")`);
  }
  return { policy, options, variant: parts.join(':') };
}

export function parseBudget(s: string): number {
  const b = Number(s);
  if (!(s.trim() !== '' && Number.isFinite(b) && b > 0 && b <= 1))
    throw new UsageError(`budget must be a number in (0, 1], got "${s}"`);
  return b;
}

export function parseBackend(s: string): BackendChoice {
  if (!(BACKENDS as readonly string[]).includes(s))
    throw new UsageError(`backend must be one of ${BACKENDS.join(', ')}, got "${s}"`);
  return s as BackendChoice;
}

export function parseKvPrecision(s: string): KvPrecision {
  if (!(KV_PRECISIONS as readonly string[]).includes(s))
    throw new UsageError(`kv must be one of ${KV_PRECISIONS.join(', ')}, got "${s}"`);
  return s as KvPrecision;
}

export function parseWeightFormat(s: string, flag = 'weights'): WeightFormat {
  if (!(WEIGHT_FORMATS as readonly string[]).includes(s))
    throw new UsageError(`${flag} must be one of ${WEIGHT_FORMATS.join(', ')}, got "${s}"`);
  return s as WeightFormat;
}

/** --format, and --json, which has always meant --format json and cannot mean another one beside it. */
export function parseOutputFormat(format: string | undefined, json: boolean): OutputFormat {
  if (format !== undefined && !(OUTPUT_FORMATS as readonly string[]).includes(format))
    throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')}, got "${format}"`);
  if (json && format !== undefined && format !== 'json')
    throw new UsageError(`--json is --format json: it cannot go with --format ${format}`);
  return json ? 'json' : ((format as OutputFormat | undefined) ?? 'txt');
}

export function parseAudioEncoder(s: string): AudioEncoderChoice {
  if (!(AUDIO_ENCODERS as readonly string[]).includes(s))
    throw new UsageError(`--audio-encoder must be one of ${AUDIO_ENCODERS.join(', ')}, got "${s}"`);
  return s as AudioEncoderChoice;
}
