import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WhisperLogMel } from '../../src/audio/whisper-mel.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';
import { HfCheckpoint } from '../../src/model/hf/checkpoint.js';
import { ensureMiniatures } from '../helpers/miniatures.js';
import { ModelLoadError } from '../../src/errors.js';
import { erf, geluInPlace } from '../../src/encoder/ops.js';
import {
  WhisperEncoder,
  lookupFromCheckpoint,
  parseWhisperEncoderConfig,
  type MelInput,
  type WhisperFamilySpec,
} from '../../src/encoder/index.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { qwen2Audio } from '../../src/model/families/qwen2-audio.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';

const PY = '/usr/bin/python3';
const REF = 'training/hf/encoder_ref.py';
const SR = 16000;

function hasTorch(): boolean {
  if (!existsSync(PY)) return false;
  try {
    execFileSync(PY, ['-c', 'import torch, numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function audioConfig(cfg: Record<string, unknown>): Record<string, unknown> {
  const thinker = cfg.thinker_config as Record<string, unknown> | undefined;
  return ((thinker ?? cfg).audio_config ?? {}) as Record<string, unknown>;
}

async function loadEncoder(dir: string, spec: WhisperFamilySpec): Promise<WhisperEncoder> {
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const ckpt = await HfCheckpoint.open(dir);
  try {
    return new WhisperEncoder(
      parseWhisperEncoderConfig(audioConfig(cfg), join(dir, 'config.json'), spec),
      spec,
      await lookupFromCheckpoint(ckpt, spec),
    );
  } finally {
    await ckpt.close();
  }
}

/** Max abs error relative to the reference's max magnitude, and NMSE. */
function compare(got: Float32Array, ref: Float64Array): { rel: number; nmse: number } {
  let err = 0;
  let mag = 0;
  let se = 0;
  let ss = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = got[i] - ref[i];
    err = Math.max(err, Math.abs(d));
    mag = Math.max(mag, Math.abs(ref[i]));
    se += d * d;
    ss += ref[i] * ref[i];
  }
  return { rel: err / mag, nmse: se / ss };
}

describe('Whisper-family encoder ops', () => {
  it('computes erf to float64 accuracy and the exact GELU', () => {
    // Reference values of erf (Abramowitz & Stegun table 7.1).
    const table: [number, number][] = [
      [0, 0],
      [0.1, 0.1124629160182849],
      [0.5, 0.5204998778130465],
      [1, 0.8427007929497149],
      [2, 0.9953222650189527],
      [3, 0.9999779095030014],
      [4.5, 0.9999999998033839],
    ];
    for (const [z, e] of table) {
      expect(Math.abs(erf(z) - e)).toBeLessThan(1e-15);
      expect(Math.abs(erf(-z) + e)).toBeLessThan(1e-15);
    }
    const g = geluInPlace(Float32Array.from([-3, -1, 0, 1, 3]));
    expect(g[3]).toBeCloseTo(0.8413447460685429, 6);
    expect(g[1]).toBeCloseTo(-0.15865525393145707, 6);
    expect(g[0]).toBeCloseTo(-0.00404969409489031, 8);
  });

  it('rejects unsupported encoder configs with a MODEL_LOAD error naming the key', () => {
    const ok = {
      num_mel_bins: 128,
      d_model: 64,
      encoder_layers: 2,
      encoder_attention_heads: 4,
      encoder_ffn_dim: 256,
      max_source_positions: 1500,
      activation_function: 'gelu',
    };
    expect(parseWhisperEncoderConfig(ok).dModel).toBe(64);
    const bad = (patch: Record<string, unknown>, key: string) => {
      let err: unknown;
      try {
        parseWhisperEncoderConfig({ ...ok, ...patch }, 'config.json', voxtral.encoder);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ModelLoadError);
      expect((err as ModelLoadError).code).toBe('MODEL_LOAD');
      expect((err as Error).message).toContain(key);
    };
    bad({ activation_function: 'relu' }, 'activation_function');
    bad({ num_mel_bins: 64 }, 'num_mel_bins');
    bad({ encoder_attention_heads: 5 }, 'encoder_attention_heads');
    bad({ max_source_positions: 750 }, 'max_source_positions');
    bad({ d_model: undefined, hidden_size: undefined }, 'd_model');
  });
});

describe('Whisper-family encoders against the PyTorch reference (training/hf/encoder_ref.py)', () => {
  const torchOk = hasTorch();
  let dir = '';
  let models = '';
  let clip = new Float32Array(0);
  const fe = new WhisperLogMel();
  const jobs: { family: string; spec: WhisperFamilySpec; examples: MelInput[] }[] = [];
  let shapes: Record<string, [number, number]> = {};

  // Features of a 70 s clip of speech as each family's processor makes them: three Voxtral
  // chunks, Qwen2-Audio clips of 30, 30 and 10 s, 35 Omni windows (plus a clip whose last
  // Omni window is short), encoded by the miniatures (training/hf/miniatures.py). One Python
  // process runs all references: importing torch is the slow part.
  beforeAll(async () => {
    if (!torchOk) return;
    models = await ensureMiniatures();
    dir = mkdtempSync(join(tmpdir(), 'wnw-encoder-'));
    const wav = parseWav(readFileSync('public/test-sets/flite/flite_awb.wav')); // 83 s of speech
    if (wav.sampleRate !== SR) throw new Error('expected 16 kHz');
    clip = downmix(wav.channels).slice(0, 70 * SR);
    const qa = { truncateTo: 480_000, padToLength: 480_000 };
    const omni = { padToLength: 300 * SR }; // padding="max_length" to n_samples; the mask keeps the audio
    jobs.push(
      { family: 'voxtral', spec: voxtral.encoder, examples: [fe.compute(clip, { padToMultipleOf: 480_000 })] },
      {
        family: 'qwen2_audio',
        spec: qwen2Audio.encoder,
        examples: [clip.subarray(0, 480_000), clip.subarray(480_000, 960_000), clip.subarray(960_000)].map((c) =>
          fe.compute(c, qa),
        ),
      },
      {
        family: 'qwen2_5_omni',
        spec: qwen25Omni.encoder,
        examples: [fe.compute(clip, omni), fe.compute(clip.subarray(0, 117_920), omni)],
      },
    );
    const spec = jobs.map((j) => ({
      family: j.family,
      out: join(dir, `${j.family}.f64`),
      examples: j.examples.map((m, i) => {
        const path = join(dir, `${j.family}-${i}.f32`);
        writeFileSync(path, new Uint8Array(m.data.buffer, m.data.byteOffset, m.data.byteLength));
        return { path, frames: m.frames, valid: m.validFrames };
      }),
    }));
    writeFileSync(join(dir, 'jobs.json'), JSON.stringify(spec));
    const out = execFileSync(PY, [REF, '--jobs', join(dir, 'jobs.json'), '--models', models], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    shapes = JSON.parse(out.trim().split('\n').pop()!);
    return () => rmSync(dir, { recursive: true, force: true });
  }, 300_000);

  /** Encodes a job's examples in TS and compares with the PyTorch tokens. */
  async function check(family: string, tokensExpected: number) {
    const job = jobs.find((j) => j.family === family)!;
    const enc = await loadEncoder(join(models, family), job.spec);
    const t0 = performance.now();
    const outs = job.examples.map((m) => enc.encode(m));
    const ms = performance.now() - t0;
    const buf = readFileSync(join(dir, `${family}.f64`));
    const ref = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
    const tokens = outs.reduce((a, o) => a + o.tokens, 0);
    expect(tokens).toBe(tokensExpected);
    expect(shapes[family]).toEqual([tokens, enc.outputWidth]);
    job.examples.forEach((m, i) => expect(enc.tokenCount(m.frames, m.validFrames)).toBe(outs[i].tokens));
    const got = new Float32Array(tokens * enc.outputWidth);
    let o = 0;
    for (const out of outs) {
      got.set(out.data, o);
      o += out.data.length;
    }
    const { rel, nmse } = compare(got, ref);
    console.log(
      `${family}: ${tokens} tokens x ${enc.outputWidth}, TS ${ms.toFixed(0)} ms, max rel error ${rel.toExponential(2)}, NMSE ${nmse.toExponential(2)}`,
    );
    expect(rel).toBeLessThanOrEqual(1e-4);
  }

  it('Voxtral: 70 s padded to 90 s, three 3000-frame chunks, 4-frame stacking, GELU projector', async (ctx) => {
    if (!torchOk) ctx.skip('needs /usr/bin/python3 with torch and numpy');
    await check('voxtral', 3 * 375);
  }, 120_000);

  it('Qwen2-Audio: 70 s as clips of 30, 30 and 10 s, padding frames masked as keys', async (ctx) => {
    if (!torchOk) ctx.skip('needs /usr/bin/python3 with torch and numpy');
    // 10 s = 1000 valid frames → 500 encoder frames → 250 tokens.
    await check('qwen2_audio', 750 + 750 + 250);
  }, 120_000);

  it('Qwen2.5-Omni: 70 s in 35 windows of 2 s, block-diagonal attention, and a 7.37 s clip with a tail window', async (ctx) => {
    if (!torchOk) ctx.skip('needs /usr/bin/python3 with torch and numpy');
    const [long, short] = jobs[2].examples;
    expect([long.frames, long.validFrames]).toEqual([30_000, 7000]);
    expect(short.validFrames).toBe(737); // 3 windows + 137 frames
    // 7000 → 3500 → 1750; 737 → 100·3 + 69 = 369 → 184.
    await check('qwen2_5_omni', 1750 + 184);
  }, 120_000);

  it('rejects features the family cannot encode', async (ctx) => {
    if (!torchOk) ctx.skip('needs the miniatures, written by /usr/bin/python3 with torch');
    const vox = await loadEncoder(join(models, 'voxtral'), voxtral.encoder);
    expect(() => vox.encode(fe.compute(clip.subarray(0, 100_000)))).toThrow(/3000-frame windows/);
    const qa = await loadEncoder(join(models, 'qwen2_audio'), qwen2Audio.encoder);
    expect(() => qa.encode(fe.compute(clip, { padToMultipleOf: 480_000 }))).toThrow(/one 3000-frame window per clip/);
    await expect(loadEncoder(join(models, 'qwen2_audio'), qwen25Omni.encoder)).rejects.toThrow(ModelLoadError);
  });
});
