/**
 * Options a caller or a command line might pass: every documented key with valid, absurd
 * and wrongly typed values, plus keys and flags that do not exist. The backend is always the
 * CPU or a wrong name (the fuzzer runs where no GPU is).
 */
import { HOSTILE, type Dice } from './random.js';
import { POLICIES as KNOWN } from '../../src/option-values.js';

// Every policy, and names that are none.
const POLICIES = [...KNOWN, 'nope', '', 'WNW'];
const oneOf = (d: Dice, good: readonly unknown[]) => (d.chance(0.7) ? d.pick(good) : d.pick(HOSTILE));

export function fuzzLoadOptions(d: Dice): Record<string, unknown> {
  const o: Record<string, unknown> = { backend: d.chance(0.85) ? 'cpu' : d.pick(['gpu', '', 'CPU', 42]) };
  const keys: [string, () => unknown][] = [
    ['policy', () => oneOf(d, POLICIES)],
    ['budget', () => oneOf(d, [0.2, 0.05, 0.5, 1, 1e-9, 1.0000001, NaN, Infinity, -0.2])],
    ['kvPrecision', () => oneOf(d, ['f32', 'f16', 'f8', 'bf16'])],
    ['weightFormat', () => oneOf(d, ['f32', 'f16', 'q4', 'q8', 'int4'])],
    ['kvMaxBytes', () => oneOf(d, [0, 1, 1024, 2 ** 20, 2 ** 40, NaN, -1, Infinity])],
    ['audioSeconds', () => oneOf(d, [0, 1, 60, 1e6, NaN, -5, Infinity])],
    ['language', () => oneOf(d, ['en', 'fr', 'klingon'])],
    ['audioEncoder', () => oneOf(d, ['onnx', 'audio-tower', 'whisper'])],
    ['cache', () => oneOf(d, [true, false])],
    ['bogusOption', () => d.pick(HOSTILE)],
    // Last, so the draws of the keys above are those of the cases before the load had a signal.
    ['signal', () => (d.chance(0.5) ? AbortSignal.abort() : d.pick(HOSTILE))],
  ];
  for (const [k, v] of keys) if (d.chance(0.35)) o[k] = v();
  return o;
}

export function fuzzTranscribeOptions(d: Dice): Record<string, unknown> {
  const o: Record<string, unknown> = { maxNewTokens: 3 };
  const keys: [string, () => unknown][] = [
    ['policy', () => oneOf(d, POLICIES)],
    ['budget', () => oneOf(d, [0.2, 0.05, 0.5, 1, 1e-9, 2, NaN, -1, Infinity])],
    ['maxNewTokens', () => oneOf(d, [0, 1, 2, 5, -1, 1.5, NaN, Infinity, 1e12])],
    ['language', () => oneOf(d, ['en', 'de'])],
    [
      'policyOptions',
      () =>
        d.pick([
          {},
          { ranking: 'voice' },
          { ranking: 'nope' },
          { nVoice: 0 },
          { nVoice: -3 },
          { nVoice: 1e9 },
          { selection: 'global' },
          { anchors: 1e6 },
          { zzz: 1 },
          'x',
          null,
          [],
        ]),
    ],
    ['forcedTokens', () => d.pick([[], [1, 2, 3], [-1], [1e9], [NaN], [0.5], 'abc', [2 ** 31]])],
    ['reusePrefill', () => oneOf(d, [true, false])],
    ['signal', () => (d.chance(0.5) ? AbortSignal.abort() : d.pick(HOSTILE))],
  ];
  for (const [k, v] of keys) if (d.chance(0.3)) o[k] = v();
  // The evaluation fields are drawn as before (the same cases per seed) and sent where they live.
  const probe: Record<string, unknown> = {};
  for (const k of ['forcedTokens', 'reusePrefill'])
    if (k in o) {
      probe[k] = o[k];
      delete o[k];
    }
  if (Object.keys(probe).length) o.probe = probe;
  return o;
}

const FLAGS: [string, readonly string[]][] = [
  ['--policy', POLICIES],
  ['--budget', ['0.2', '0', '1', '1.5', '-1', 'NaN', 'abc', '1e-9', '']],
  ['--backend', ['cpu', 'gpu', 'auto', '']],
  ['--kv', ['f32', 'f16', 'f8']],
  ['--weights', ['f32', 'f16', 'q4', 'q8']],
  ['--language', ['en', 'xx']],
  ['--audio-encoder', ['onnx', 'audio-tower', 'whisper']],
  ['--json', []],
  ['--zzz', ['1']],
  ['--help', []],
];

/** A command line for `wnw`: mostly `transcribe` with random flags, some other commands and malformed ones. */
export function fuzzCliArgs(d: Dice, p: { wav: string; model: string; missing: string }): string[] {
  const argv: string[] = [
    d.pick(['transcribe', 'transcribe', 'transcribe', 'transcribe', 'convert', 'bogus', '--help', '']),
  ];
  if (d.chance(0.9)) argv.push(d.pick([p.wav, p.wav, p.wav, p.missing, p.model]));
  argv.push('--model', d.pick([p.model, p.model, p.model, p.missing, p.wav]));
  // Always the CPU unless a wrong name is the point: 'auto' would try a GPU adapter.
  const backend = d.chance(0.9) ? 'cpu' : d.pick(['gpu', '']);
  argv.push('--backend', backend);
  for (let i = d.int(0, 4); i > 0; i--) {
    const [flag, values] = d.pick(FLAGS);
    if (flag === '--backend') continue;
    if (!values.length) argv.push(flag);
    else if (d.chance(0.5)) argv.push(`${flag}=${d.pick(values)}`);
    else if (d.chance(0.9)) argv.push(flag, d.pick(values));
    else argv.push(flag);
  }
  return argv;
}
