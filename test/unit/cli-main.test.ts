import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { progressLine, runCli, type CliIo } from '../../src/cli/main.js';
import { parseTranscribeArgs, defaultModelDir } from '../../src/cli/args.js';
import { AudioError, CancelledError } from '../../src/errors.js';
import type {
  LoadOptions,
  ProgressEvent,
  TranscribeOptions,
  Transcriber,
  TranscriptionResult,
  TranscriptionStats,
} from '../../src/types.js';
import { tempDir } from '../helpers/temp.js';
import { statedLimitWarnings } from '../../src/model/families/limits.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { fakeTranscriberRest } from '../helpers/fake-transcriber.js';

// A stand-in for loadTranscriber, local to this test: the CLI's job is argument handling,
// I/O and exit codes, which must not wait for a trained model.
function fakeLoad(seen: { load?: LoadOptions; call?: TranscribeOptions; disposed?: boolean }) {
  return async (o: LoadOptions): Promise<Transcriber> => {
    seen.load = o;
    return {
      backend: 'CPU (TypeScript)',
      ...fakeTranscriberRest,
      dispose: () => void (seen.disposed = true),
      open: () => Promise.reject(new Error('this fake transcribes only')),
      async transcribe(input, call = {}): Promise<TranscriptionResult> {
        seen.call = call;
        const samples = input as Float32Array;
        const stats: TranscriptionStats = {
          policy: call.policy ?? o.policy ?? 'full',
          budget: o.budget ?? 1,
          backend: 'CPU (TypeScript)',
          audioSeconds: 2.5,
          audioTokens: 31,
          decodeSteps: 12,
          kv: {
            rGpu: 0.21,
            rGpuPeak: 0.3,
            rGpuCpu: 0.45,
            gpuKvBytes: 1000,
            cpuKvBytes: 2000,
            textKvPages: 0,
          },
          traffic: {
            mbPerStep: 0.01,
            mbPerStepMax: 0.02,
            recallsPerStep: 1,
            releasesPerStep: 1,
          },
          timing: {
            msPerToken: 3.5,
            prefillMs: 10,
            encodeMs: 5,
            realTimeFactor: 0.1,
          },
          prompt: { reusedPositions: 0, prefilledPositions: 0 },
          stoppedBy: 'eos',
        };
        const partial = samples[0] === 1;
        const nothing = samples[0] === 2;
        // A 31-minute Voxtral recording: the warning the library puts in the stats.
        if (samples[0] === 3)
          return {
            text: 'hello',
            rawText: 'hello',
            words: [],
            tokens: [1],
            stats: { ...stats, warnings: statedLimitWarnings(voxtral, 31 * 60) },
          };
        if (nothing)
          return {
            text: '',
            rawText: '',
            words: [],
            tokens: [],
            stats: { ...stats, decodeSteps: 0 },
            error: new CancelledError(),
          };
        return {
          text: partial ? 'hello' : 'hello world',
          rawText: partial ? 'hello' : 'hello world',
          words: [{ word: 'hello', start: 0.1, end: 0.5 }],
          tokens: [1, 2],
          stats,
          ...(partial ? { error: new CancelledError() } : {}),
        };
      },
    };
  };
}

function io(seen = {}): CliIo & { out: string; err: string } {
  const r = {
    out: '',
    err: '',
    tty: false,
    load: fakeLoad(seen),
    stdout: (s: string) => void (r.out += s),
    stderr: (s: string) => void (r.err += s),
    readFile: async (p: string) => new Uint8Array(await readFile(p)),
    decode: async (b: Uint8Array) => {
      if (String.fromCharCode(...b.slice(0, 4)) !== 'RIFF')
        throw new AudioError('not a WAV file: no RIFF header\n(expected PCM16, PCM24 or float32)');
      return new Float32Array([b[4], 0, 0]);
    },
  };
  return r;
}

const dir = tempDir('wnw-cli-');
const wav = join(dir, 'a.wav');
writeFileSync(wav, Buffer.from('RIFF\0\0\0\0WAVE'));
const bad = join(dir, 'bad.wav');
writeFileSync(bad, Buffer.from('this is not audio'));
const empty = join(dir, 'empty.wav');
writeFileSync(empty, Buffer.alloc(0));
const partial = join(dir, 'partial.wav');
const pastLimit = join(dir, 'past-limit.wav');
writeFileSync(pastLimit, Buffer.from('RIFF\x03\0\0\0WAVE', 'latin1'));
const cancelledAtOnce = join(dir, 'nothing.wav');
writeFileSync(cancelledAtOnce, Buffer.from('RIFF\x02\0\0\0WAVE', 'latin1'));
writeFileSync(partial, Buffer.from('RIFF\x01\0\0\0WAVE', 'latin1'));

describe('wnw transcribe', () => {
  it('prints the transcript and says the backend on stderr', async () => {
    const seen: { load?: LoadOptions; disposed?: boolean } = {};
    const t = io(seen);
    expect(await runCli(['transcribe', wav], t)).toBe(0);
    expect(seen.load).toBeDefined();
    expect(t.out).toBe('hello world\n');
    expect(t.err).toMatch(/backend CPU \(TypeScript\) \(auto\)/);
    expect(seen.load).toMatchObject({
      policy: 'wnw',
      budget: 0.2,
      backend: 'auto',
      kvPrecision: 'f32',
      model: defaultModelDir(),
    });
    expect(seen.disposed).toBe(true);
  });

  it("a recording past the family's stated limit prints the stats' warning on stderr and in --json", async () => {
    const t = io();
    expect(await runCli(['transcribe', pastLimit], t)).toBe(0);
    expect(t.out).toBe('hello\n');
    expect(t.err).toMatch(
      /^wnw: warning: the recording \(31\.0 min\) is past the stated 30 min transcription limit of mistralai\/Voxtral-Mini-3B-2507: .*at most 30 min/m,
    );
    const j = io();
    expect(await runCli(['transcribe', pastLimit, '--json'], j)).toBe(0);
    expect(JSON.parse(j.out).stats.warnings).toEqual(statedLimitWarnings(voxtral, 31 * 60));
  });

  it('--json prints the documented fields', async () => {
    const t = io();
    expect(
      await runCli(['transcribe', wav, '--json', '--policy', 'snapkv', '--budget=0.4', '--backend', 'cpu'], t),
    ).toBe(0);
    const j = JSON.parse(t.out);
    expect(j.text).toBe('hello world');
    expect(j.words[0]).toEqual({ word: 'hello', start: 0.1, end: 0.5 });
    for (const k of ['policy', 'budget', 'rGpu', 'rGpuCpu', 'mbPerStep', 'msPerToken', 'decodeSteps', 'audioSeconds'])
      expect(j.stats).toHaveProperty(k);
    expect(j.stats).toMatchObject({ policy: 'snapkv', budget: 0.4, rGpu: 0.21, decodeSteps: 12, audioSeconds: 2.5 });
  });

  it('--format: txt is the default, json is --json, srt and vtt print subtitles of the dated words', async () => {
    const out = async (...flags: string[]) => {
      const t = io();
      expect(await runCli(['transcribe', wav, ...flags], t)).toBe(0);
      return t.out;
    };
    expect(await out('--format', 'txt')).toBe(await out());
    expect(await out('--format', 'json')).toBe(await out('--json'));
    expect(await out('--format=json', '--json')).toBe(await out('--json'));
    expect(await out('--format', 'srt')).toBe('1\n00:00:00,100 --> 00:00:01,100\nhello\n\n');
    expect(await out('--format', 'vtt')).toBe('WEBVTT\n\n00:00:00.100 --> 00:00:01.100\nhello\n\n');
  });

  it('a bad file exits non-zero with a one-line reason, before loading the model', async () => {
    for (const [file, pattern] of [
      [bad, /bad\.wav: not a WAV file: no RIFF header \(expected/],
      [empty, /is empty/],
      [join(dir, 'missing.wav'), /no such file/],
    ] as const) {
      const seen: { load?: LoadOptions } = {};
      const t = io(seen);
      expect(await runCli(['transcribe', file], t)).toBe(1);
      expect(t.out).toBe('');
      const lines = t.err.trim().split('\n');
      expect(lines.length).toBe(1);
      expect(lines[0]).toMatch(pattern);
      expect(seen.load).toBeUndefined();
    }
  });

  it('a cancelled run still prints the partial transcript', async () => {
    const t = io();
    expect(await runCli(['transcribe', partial], t)).toBe(130);
    expect(t.out).toBe('hello\n');
    expect(t.err).toMatch(/cancelled.*partial/);
    // Stopped before any token: no "transcript above" to speak of.
    const none = io();
    expect(await runCli(['transcribe', cancelledAtOnce], none)).toBe(130);
    expect(none.err).toMatch(/cancelled.*\(nothing was transcribed\)/);
    expect(none.err).not.toMatch(/partial/);
  });

  it('usage errors exit 2 and name the problem', async () => {
    for (const [argv, pattern] of [
      [['transcribe'], /missing the audio file/],
      [['transcribe', wav, '--policy', 'nope'], /unknown policy "nope"/],
      [['transcribe', wav, '--budget', '2'], /budget must be a number in \(0, 1\]/],
      [['transcribe', wav, '--backend', 'tpu'], /backend must be one of/],
      [['transcribe', wav, '--kv', 'f8'], /kv must be one of f32, f16/],
      [
        ['transcribe', wav, '--language', 'English'],
        /--language takes a language code of 2 or 3 letters .* or "none" for no language .*got "English"/,
      ],
      [['transcribe', wav, '--language', 'en-US'], /--language takes a language code/],
      [['transcribe', wav, '--task', 'summarise'], /--task must be one of transcribe, translate, got "summarise"/],
      [['transcribe', wav, '--task', 'translate'], /--task translate needs --target-language/],
      [
        ['transcribe', wav, '--task', 'translate', '--target-language', 'German'],
        /needs --target-language, .* got "German"/,
      ],
      [['transcribe', wav, '--target-language', 'de'], /--target-language goes with --task translate/],
      [
        ['transcribe', wav, '--audio-encoder', 'whisper'],
        /--audio-encoder must be one of onnx, audio-tower, got "whisper"/,
      ],
      [['transcribe', wav, '--format', 'docx'], /--format must be one of txt, json, srt, vtt, got "docx"/],
      [['transcribe', wav, '--json', '--format=vtt'], /--json is --format json: it cannot go with --format vtt/],
      [['transcribe', wav, '--frobnicate'], /--frobnicate needs a value|unknown option --frobnicate/],
      [['translate', wav], /unknown command/],
    ] as const) {
      const t = io();
      expect(await runCli([...argv], t)).toBe(2);
      expect(t.err).toMatch(pattern);
    }
  });

  it('--language reaches the model load; without it none is sent', async () => {
    const seen: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav, '--language', 'de', '--policy', 'full'], io(seen))).toBe(0);
    expect(seen.load?.language).toBe('de');
    const none: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav], io(none))).toBe(0);
    expect(none.load).not.toHaveProperty('language');
    // "none" is no language: it reaches the load, which builds the prompt without one.
    const noLanguage: { load?: LoadOptions; call?: TranscribeOptions } = {};
    expect(await runCli(['transcribe', wav, '--language', 'none', '--policy', 'full'], io(noLanguage))).toBe(0);
    expect(noLanguage.load?.language).toBe('none');
    // A translation goes with the transcribe call; a transcription sends neither option.
    const translated: { call?: TranscribeOptions } = {};
    expect(
      await runCli(
        ['transcribe', wav, '--language', 'en', '--task', 'translate', '--target-language', 'de', '--policy', 'full'],
        io(translated),
      ),
    ).toBe(0);
    expect([translated.call?.task, translated.call?.targetLanguage]).toEqual(['translate', 'de']);
    expect(noLanguage.call).not.toHaveProperty('task');
    expect(noLanguage.call).not.toHaveProperty('targetLanguage');
  });

  it('--audio-encoder reaches the model load as audioEncoder; without it none is sent', async () => {
    expect(parseTranscribeArgs(['x.wav', '--audio-encoder', 'onnx']).audioEncoder).toBe('onnx');
    expect(parseTranscribeArgs(['x.wav', '--audio-encoder=audio-tower']).audioEncoder).toBe('audio-tower');
    expect(parseTranscribeArgs(['x.wav'])).not.toHaveProperty('audioEncoder');
    const seen: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav, '--audio-encoder', 'audio-tower', '--policy', 'full'], io(seen))).toBe(0);
    expect(seen.load?.audioEncoder).toBe('audio-tower');
    const none: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav], io(none))).toBe(0);
    expect(none.load).not.toHaveProperty('audioEncoder');
    const help = io();
    expect(await runCli(['--help'], help)).toBe(0);
    expect(help.out).toMatch(/--audio-encoder onnx\|audio-tower/);
    expect(help.out).toMatch(/--audio-encoder audio-tower runs the checkpoint's audio tower/);
  });

  it('resolves paths against the working directory', () => {
    const a = parseTranscribeArgs(['x.wav', '--model', 'm'], '/data');
    expect(a.file).toBe('/data/x.wav');
    expect(a.model).toBe('/data/m');
    expect(parseTranscribeArgs(['x.wav', '--kv', 'f16'], '/data').kv).toBe('f16');
    expect(defaultModelDir()).toMatch(/public\/models\/wnw-ref$/);
  });
});

describe('wnw transcribe: progress and the default weight format', () => {
  it('the progress line carries the bytes and pipeline counts of the event', async () => {
    const GiB = 2 ** 30;
    expect(
      progressLine({
        phase: 'download',
        fraction: 0.42,
        detail: 'decoder weights',
        bytes: { loaded: 1.2 * GiB, total: 2.85 * GiB },
      }),
    ).toBe('download  42% decoder weights (1.20 GiB of 2.85 GiB)');
    expect(
      progressLine({
        phase: 'compile',
        fraction: 0.5,
        detail: 'decoder kernels',
        pipelines: { compiled: 12, total: 24 },
      }),
    ).toBe('compile  50% decoder kernels (12 of 24 pipelines)');
    expect(progressLine({ phase: 'encode', fraction: 1 })).toBe('encode 100%');
    // On a terminal each event redraws the one line.
    const t = io();
    t.tty = true;
    t.load = async (o) => {
      o.onProgress?.({
        phase: 'upload',
        fraction: 0.25,
        detail: 'decoder weights',
        bytes: { loaded: 512 * 1024, total: 2 * 2 ** 20 },
      } satisfies ProgressEvent);
      return fakeLoad({})(o);
    };
    expect(await runCli(['transcribe', wav], t)).toBe(0);
    expect(t.err).toContain('upload  25% decoder weights (512 KiB of 2.0 MiB)');
  });

  it("--weights defaults to q4 for a Hugging Face folder, to a converted folder's format, to f32 for our own", async () => {
    const hf = join(dir, 'hf');
    mkdirSync(hf, { recursive: true });
    writeFileSync(join(hf, 'config.json'), JSON.stringify({ model_type: 'voxtral' }));
    const converted = join(dir, 'hf-f16');
    mkdirSync(converted, { recursive: true });
    writeFileSync(join(converted, 'config.json'), JSON.stringify({ model_type: 'voxtral' }));
    writeFileSync(join(converted, 'wnw-weights.json'), JSON.stringify({ format: 'f16', version: 1 }));
    expect(parseTranscribeArgs(['x.wav', '--model', hf]).weights).toBe('q4');
    expect(parseTranscribeArgs(['x.wav', '--model', converted]).weights).toBe('f16');
    expect(parseTranscribeArgs(['x.wav']).weights).toBe('f32');
    expect(parseTranscribeArgs(['x.wav', '--model', hf, '--weights', 'f32']).weights).toBe('f32');
    // A folder without a readable config: the loader says what is wrong.
    expect(parseTranscribeArgs(['x.wav', '--model', join(dir, 'nowhere')]).weights).toBe('f32');
    const seen: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav, '--model', hf], io(seen))).toBe(0);
    expect(seen.load?.weightFormat).toBe('q4');
    const help = io();
    expect(await runCli(['--help'], help)).toBe(0);
    expect(help.out).toMatch(/--weights defaults to q4 for a Hugging Face folder/);
  });

  it("--audio-weights passes the audio tower's format on, is left to the default when absent, and a bad value is a usage error", async () => {
    expect(parseTranscribeArgs(['x.wav', '--audio-weights', 'q4']).audioWeights).toBe('q4');
    expect(parseTranscribeArgs(['x.wav']).audioWeights).toBeUndefined();
    expect(() => parseTranscribeArgs(['x.wav', '--audio-weights', 'int8'])).toThrow(
      /audio-weights must be one of f32, f16, q4, got "int8"/,
    );
    const seen: { load?: LoadOptions } = {};
    expect(await runCli(['transcribe', wav, '--audio-weights', 'f16'], io(seen))).toBe(0);
    expect(seen.load?.audioWeightFormat).toBe('f16');
    const help = io();
    expect(await runCli(['--help'], help)).toBe(0);
    expect(help.out).toMatch(/--audio-weights .* defaults to f16 beside a q4 decoder/);
  });
});
