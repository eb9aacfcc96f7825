/**
 * The load and transcribe options checked before anything runs: a value outside what an
 * option takes is a BAD_ARGUMENT naming the option, the value and what it takes, instead
 * of a NaN deep in the pool's arithmetic, an endless decode or a silent default. Callers
 * in plain JavaScript (or from JSON) pass values TypeScript never sees.
 */
import { WnwError } from '../errors.js';
import { KV_PRECISIONS } from '../kv/precision.js';
import { AUDIO_ENCODERS } from '../model/hf/onnx-audio.js';
import { WEIGHT_FORMATS } from '../model/packed-weights.js';
import { languageCode } from '../model/text/language.js';
import { taskTarget } from '../model/text/prompt.js';
import type { LoadOptions, Probe, RecordingOptions, TranscribeOptions } from '../types.js';

/** A value as a message shows it: strings quoted, objects named rather than printed. */
export const show = (v: unknown): string =>
  typeof v === 'string'
    ? JSON.stringify(v)
    : Array.isArray(v)
      ? `[${v.map(show).join(', ')}]`
      : typeof v === 'object' && v
        ? 'an object'
        : String(v);

function bad(option: string, value: unknown, takes: string): never {
  throw new WnwError('BAD_ARGUMENT', `option ${option} must be ${takes}, got ${show(value)}`);
}

function oneOf(option: string, value: unknown, allowed: readonly string[]): void {
  if (value !== undefined && !allowed.includes(value as string))
    bad(option, value, `one of ${allowed.map((a) => `"${a}"`).join(', ')}`);
}

const isPositive = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v > 0;

/** An AbortSignal, as plain JavaScript may hand over anything in its place. */
function checkSignal(signal: unknown): void {
  if (
    signal !== undefined &&
    !(
      typeof signal === 'object' &&
      signal &&
      typeof (signal as AbortSignal).aborted === 'boolean' &&
      typeof (signal as AbortSignal).addEventListener === 'function'
    )
  ) {
    bad('signal', signal, 'an AbortSignal');
  }
}

export function checkLoadOptions(o: LoadOptions): void {
  checkSignal(o.signal);
  if (typeof o.model !== 'string' || !o.model) bad('model', o.model, "the model folder's path or URL");
  oneOf('backend', o.backend, ['auto', 'cpu', 'webgpu']);
  oneOf('kvPrecision', o.kvPrecision, KV_PRECISIONS);
  oneOf('weightFormat', o.weightFormat, WEIGHT_FORMATS);
  oneOf('audioWeightFormat', o.audioWeightFormat, WEIGHT_FORMATS);
  oneOf('audioEncoder', o.audioEncoder, AUDIO_ENCODERS);
  if (o.kvMaxBytes !== undefined && !(isPositive(o.kvMaxBytes) && Number.isInteger(o.kvMaxBytes)))
    bad('kvMaxBytes', o.kvMaxBytes, 'a whole number of bytes above 0');
  if (o.hostMemoryBytes !== undefined && !(isPositive(o.hostMemoryBytes) && Number.isInteger(o.hostMemoryBytes)))
    bad('hostMemoryBytes', o.hostMemoryBytes, 'a whole number of bytes above 0');
  if (o.audioSeconds !== undefined && !isPositive(o.audioSeconds))
    bad('audioSeconds', o.audioSeconds, "the recording's length in seconds, above 0");
  languageCode(o.language);
  if (o.cache !== undefined && typeof o.cache !== 'boolean') bad('cache', o.cache, 'true or false');
}

export function checkTranscribeOptions(o: TranscribeOptions): void {
  if (o.maxNewTokens !== undefined && !(Number.isInteger(o.maxNewTokens) && o.maxNewTokens >= 1))
    bad('maxNewTokens', o.maxNewTokens, 'a whole number of tokens, at least 1');
  checkSignal(o.signal);
  if (
    o.policyOptions !== undefined &&
    (typeof o.policyOptions !== 'object' || o.policyOptions === null || Array.isArray(o.policyOptions))
  ) {
    bad('policyOptions', o.policyOptions, 'an object of option names to values');
  }
  languageCode(o.language);
  taskTarget(o.task, o.targetLanguage);
  if (o.probe !== undefined) checkProbe(o.probe);
}

export function checkRecordingOptions(o: RecordingOptions): void {
  checkSignal(o.signal);
  if (o.system !== undefined && o.system !== null && typeof o.system !== 'string')
    bad('system', o.system, 'a system message (a string), or null for none');
}

const PROBE_HOOKS = ['onLogits', 'onAttention', 'onResidency'] as const;

function checkProbe(p: Probe): void {
  if (typeof p !== 'object' || p === null || Array.isArray(p)) bad('probe', p, 'an object');
  if (
    p.forcedTokens !== undefined &&
    !(Array.isArray(p.forcedTokens) && p.forcedTokens.every((t) => Number.isInteger(t) && t >= 0))
  ) {
    bad('probe.forcedTokens', p.forcedTokens, 'an array of token ids (whole numbers from 0)');
  }
  if (p.reusePrefill !== undefined && typeof p.reusePrefill !== 'boolean')
    bad('probe.reusePrefill', p.reusePrefill, 'true or false');
  for (const k of PROBE_HOOKS)
    if (p[k] !== undefined && typeof p[k] !== 'function') bad(`probe.${k}`, p[k], 'a function');
}
