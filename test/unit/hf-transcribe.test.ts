/**
 * Transcription from a Hugging Face folder end to end on the miniatures (random weights, so
 * the text is nonsense): WAV → Whisper front-end → audio tower and projector → the family's
 * prompt → decoder → tokens, through `loadTranscriber` and the CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { toMono16k } from '../../src/audio/decode.js';
import { WhisperLogMel, type WhisperPadding } from '../../src/audio/whisper-mel.js';
import {
  asStored,
  lookupFromCheckpoint,
  parseWhisperEncoderConfig,
  WhisperEncoder,
  type WhisperFamilySpec,
} from '../../src/encoder/index.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { qwen2Audio } from '../../src/model/families/qwen2-audio.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { familyFor } from '../../src/model/families/registry.js';
import { HfCheckpoint } from '../../src/model/hf/checkpoint.js';
import { buildPrompt, loadTextTokenizer, promptIds, readChatTemplate } from '../../src/model/text/index.js';
import { WnwError } from '../../src/errors.js';
import type { WeightFormat } from '../../src/model/quant.js';
import type { DecoderBackend } from '../../src/backend/types.js';
import { ensureMiniatures, MINIATURE_FAMILIES, type MiniatureFamily } from '../helpers/miniatures.js';
import { withSeededHeads } from '../helpers/seeded-heads.js';
import { runCliCaptured } from '../helpers/cli.js';
import { expectWnwDecoded } from '../helpers/expect-wnw.js';

const SR = 16000;
const MAX_NEW = 6;

/** Each family's processor example(s), written here from the encoder tests' rules rather than read from the route. */
const FAMILY: Record<MiniatureFamily, { spec: WhisperFamilySpec; pad: WhisperPadding }> = {
  voxtral: { spec: voxtral.encoder, pad: { padToMultipleOf: 480_000 } },
  qwen2_audio: { spec: qwen2Audio.encoder, pad: { truncateTo: 480_000, padToLength: 480_000 } },
  qwen2_5_omni: { spec: qwen25Omni.encoder, pad: { padToLength: 300 * SR } },
};

async function referenceEmbeddings(
  dir: string,
  family: MiniatureFamily,
  samples: Float32Array,
  format: WeightFormat = 'f32',
): Promise<Float32Array> {
  const { spec, pad } = FAMILY[family];
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const audio = (((cfg.thinker_config as Record<string, unknown> | undefined) ?? cfg).audio_config ?? {}) as Record<
    string,
    unknown
  >;
  const ckpt = await HfCheckpoint.open(dir);
  let enc: WhisperEncoder;
  try {
    const config = parseWhisperEncoderConfig(audio, join(dir, 'config.json'), spec);
    enc = new WhisperEncoder(config, spec, asStored(await lookupFromCheckpoint(ckpt, spec), config, spec, format));
  } finally {
    await ckpt.close();
  }
  return enc.encode(new WhisperLogMel().compute(samples, pad)).data;
}

describe('transcribing from a Hugging Face folder', () => {
  let models = '';
  let tmp = '';
  let wav = '';
  let bytes: Uint8Array = new Uint8Array(0);
  let samples: Float32Array = new Float32Array(0);
  const encodings = new Map<string, Awaited<ReturnType<WnwTranscriber['encode']>>>();

  beforeAll(async () => {
    models = await ensureMiniatures();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-hf-transcribe-'));
    wav = join(tmp, 'clip.wav');
    execFileSync('espeak-ng', ['-w', wav, 'the quick brown fox jumps over the lazy dog'], { stdio: 'ignore' });
    bytes = new Uint8Array(readFileSync(wav));
    samples = await toMono16k(bytes, SR);
  }, 120_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: WAV → encoder → prompt → tokens, full cache and WnW at 0.2`, async () => {
      const dir = join(models, family);
      const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
      try {
        expect(t.audioRoute).toContain('Whisper encoder');
        // The embeddings are the encoder's on the family's features (the route the encoder tests check).
        const phases: string[] = [];
        const onProgress = (e: { phase: string }) => void (phases.at(-1) !== e.phase && phases.push(e.phase));
        const enc = await t.encode(bytes, { onProgress });
        encodings.set(family, enc);
        const ref = await referenceEmbeddings(dir, family, samples);
        expect(enc.audioLength * t.model.config.hiddenSize).toBe(ref.length);
        expect(enc.embeddings).toEqual(ref);
        expect(enc.encoderBytes).toBeGreaterThan(0);

        // The prompt the decoder runs on is the family's, with the placeholder span filled by the audio.
        const tok = await loadTextTokenizer(dir);
        const expected = promptIds(
          buildPrompt(familyFor(family)!.prompt, tok, { chatTemplate: await readChatTemplate(dir) }),
          enc.audioLength,
        );
        const c = t.model.config;
        let seen: number[] = [];
        const res = await t.decodeEncoded(enc, {
          maxNewTokens: MAX_NEW,
          onProgress: (e) => {
            onProgress(e);
            if (e.phase === 'prefill')
              seen = [
                ...c.prefix,
                ...new Array<number>(enc.audioLength).fill(expected[c.prefix.length]),
                ...c.instruction,
              ];
          },
        });
        expect(res.error).toBeUndefined();
        expect(seen).toEqual(expected);
        expect(phases).toEqual(['encode', 'prefill', 'decode']);
        expect(res.stats.audioTokens).toBe(enc.audioLength);
        expect(res.stats.timing.encodeMs).toBeGreaterThan(0);
        expect(res.stats.encoderBytes).toBe(enc.encoderBytes);
        // It stops at a stop token or the cap, and the text is the tokenizer's.
        if (res.stats.stoppedBy === 'length-guard') expect(res.tokens.length).toBe(MAX_NEW);
        else expect(res.stats.stoppedBy).toBe('eos');
        expect(res.tokens.length).toBeLessThanOrEqual(MAX_NEW);
        for (const id of res.tokens) expect(c.stopTokens).not.toContain(id);
        expect(res.text).toBe(tok.decode(res.tokens).trim());

        // WnW at 0.2 with a seeded heads.json, on the same encoding.
        const wnwDir = withSeededHeads(dir, join(tmp, `${family}-heads`), t, enc.audioLength);
        const w = await loadTranscriber({ model: wnwDir, backend: 'cpu', policy: 'wnw', budget: 0.2 });
        try {
          const r = await w.decodeEncoded(enc, { maxNewTokens: MAX_NEW });
          expectWnwDecoded(r);
        } finally {
          w.dispose();
        }
      } finally {
        t.dispose();
      }
    }, 60_000);
  }

  it('a language option rebuilds the prompt for that language (Voxtral: lang:en before [TRANSCRIBE])', async () => {
    const dir = join(models, 'voxtral');
    const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
    try {
      const c = t.model.config;
      const tok = await loadTextTokenizer(dir);
      expect(c.prefix).toEqual([1, 3, 25]);
      expect(c.instruction).toEqual([4, 34]);
      const enc = encodings.get('voxtral') ?? (await t.encode(bytes));
      let during: number[] = [];
      // The prompt goes to the backend with the session; the shared config stays the load-time one meanwhile.
      const decoder = (t as unknown as { decoder: DecoderBackend }).decoder;
      const open = decoder.open.bind(decoder);
      const openByLayer = decoder.openByLayer.bind(decoder);
      decoder.open = (o) => {
        during = [...(o.prompt ?? c).instruction];
        return open(o);
      };
      decoder.openByLayer = (o) => {
        during = [...(o.prompt ?? c).instruction];
        return openByLayer(o);
      };
      let configDuring: number[] = [];
      await t.decodeEncoded(enc, {
        maxNewTokens: 1,
        language: 'en',
        onProgress: (e) => void (e.phase === 'prefill' && (configDuring = [...c.instruction])),
      });
      expect(during).toEqual([4, ...tok.encode('lang:en'), 34]);
      expect(configDuring).toEqual([4, 34]);
      expect(c.instruction).toEqual([4, 34]); // the load-time prompt is back
    } finally {
      t.dispose();
    }
    const en = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full', language: 'en' });
    try {
      expect(en.model.config.instruction.slice(0, 1)).toEqual([4]);
      expect(en.model.config.instruction.length).toBeGreaterThan(2);
    } finally {
      en.dispose();
    }
  }, 60_000);

  it('Qwen2-Audio audio longer than 30 s is encoded as consecutive 30 s clips, one span in the prompt', async () => {
    const dir = join(models, 'qwen2_audio');
    const long = new Float32Array(32 * SR);
    for (let o = 0; o < long.length; o += samples.length)
      long.set(samples.subarray(0, Math.min(samples.length, long.length - o)), o);
    const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
    try {
      const fractions: number[] = [];
      const enc = await t.encode(long, {
        onProgress: (e) => void (e.phase === 'encode' && fractions.push(e.fraction)),
      });
      const a = await referenceEmbeddings(dir, 'qwen2_audio', long.subarray(0, 30 * SR));
      const b = await referenceEmbeddings(dir, 'qwen2_audio', long.subarray(30 * SR));
      const D = t.model.config.hiddenSize;
      expect(enc.audioLength).toBe(750 + 50); // 25 Hz: 30 s, then 2 s
      expect(enc.embeddings.subarray(0, a.length)).toEqual(a);
      expect(enc.embeddings.subarray(a.length)).toEqual(b);
      expect(enc.embeddings.length).toBe(enc.audioLength * D);
      expect(fractions).toEqual([0, 0.5, 1]);
    } finally {
      t.dispose();
    }
  }, 60_000);

  it('beside a q4 decoder the audio tower is f16 by default, and q4 when asked (the CPU encoder computes with the same values)', async () => {
    const dir = join(models, 'qwen2_5_omni');
    const byDefault = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full', weightFormat: 'q4' });
    try {
      expect(byDefault.audioRoute).toContain('f16 weights');
      expect((await byDefault.encode(samples)).embeddings).toEqual(
        await referenceEmbeddings(dir, 'qwen2_5_omni', samples, 'f16'),
      );
    } finally {
      byDefault.dispose();
    }
    const t = await loadTranscriber({
      model: dir,
      backend: 'cpu',
      policy: 'full',
      weightFormat: 'q4',
      audioWeightFormat: 'q4',
    });
    try {
      expect(t.audioRoute).toContain('q4 weights');
      const enc = await t.encode(samples);
      expect(enc.embeddings).toEqual(await referenceEmbeddings(dir, 'qwen2_5_omni', samples, 'q4'));
      expect(enc.embeddings).not.toEqual(await referenceEmbeddings(dir, 'qwen2_5_omni', samples));
      const r = await t.decodeEncoded(enc, { maxNewTokens: 2 });
      expect(r.error).toBeUndefined();
      expect(r.stats.decodeSteps).toBeGreaterThan(0);
    } finally {
      t.dispose();
    }
  }, 60_000);

  it('WnW without heads.json is a typed error that says to calibrate, never a silent fallback', async () => {
    const dir = join(models, 'qwen2_audio');
    const err = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'wnw' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect((err as WnwError).code).toBe('BAD_ARGUMENT');
    expect((err as Error).message).toContain(`npm run calibrate -- --model ${dir}`);
    const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
    try {
      const e2 = await t.transcribe(bytes, { policy: 'wnw', maxNewTokens: 1 }).catch((e: unknown) => e);
      expect(e2).toBeInstanceOf(WnwError);
      expect((e2 as Error).message).toContain('heads.json');
    } finally {
      t.dispose();
    }
  }, 60_000);

  it('the CLI transcribes from a Hugging Face folder (--model DIR --backend cpu --json)', async () => {
    const dir = join(models, 'qwen2_5_omni');
    const full = await runCliCaptured([
      'transcribe',
      wav,
      '--model',
      dir,
      '--backend',
      'cpu',
      '--policy',
      'full',
      '--language',
      'en',
      '--json',
    ]);
    expect(full.code, full.err).toBe(0);
    const json = JSON.parse(full.out) as {
      text: string;
      stats: { policy: string; backend: string; encodeMs: number; encoderBytes: number; stoppedBy: string };
    };
    expect(json.stats.policy).toBe('full');
    expect(json.stats.backend).toContain('CPU');
    expect(json.stats.encodeMs).toBeGreaterThan(0);
    expect(json.stats.encoderBytes).toBeGreaterThan(0);
    expect(['eos', 'length-guard']).toContain(json.stats.stoppedBy);
    // WnW asked for by name: without heads.json the CLI says how to calibrate and fails.
    const wnw = await runCliCaptured([
      'transcribe',
      wav,
      '--model',
      dir,
      '--backend',
      'cpu',
      '--policy',
      'wnw',
      '--json',
    ]);
    expect(wnw.code).toBe(1);
    expect(wnw.out).toBe('');
    expect(wnw.err).toContain('npm run calibrate -- --model');
    // No policy asked for: a first run on a fresh download runs the full cache and says why, in one line.
    const first = await runCliCaptured(['transcribe', wav, '--model', dir, '--backend', 'cpu', '--json']);
    expect(first.code).toBe(0);
    expect((JSON.parse(first.out) as { stats: { policy: string } }).stats.policy).toBe('full');
    expect(first.err).toMatch(/has no heads\.json, so this runs the full cache/);
  }, 120_000);
});
