import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ComplexFft, RealPowerFft } from '../../src/audio/mixed-fft.js';
import {
  WhisperLogMel,
  slaneyFilterbank,
  whisperPaddedLength,
  WHISPER_MEL,
  type WhisperPadding,
} from '../../src/audio/whisper-mel.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';

const PY = '/usr/bin/python3';
const MEL_REF = 'training/hf/mel_ref.py';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
}

function directDft(re: Float64Array, im: Float64Array): [Float64Array, Float64Array] {
  const n = re.length;
  const or = new Float64Array(n);
  const oi = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    let ar = 0;
    let ai = 0;
    for (let j = 0; j < n; j++) {
      const a = (-2 * Math.PI * ((j * k) % n)) / n;
      ar += re[j] * Math.cos(a) - im[j] * Math.sin(a);
      ai += re[j] * Math.sin(a) + im[j] * Math.cos(a);
    }
    or[k] = ar;
    oi[k] = ai;
  }
  return [or, oi];
}

function loadWav(path: string): Float32Array {
  const a = parseWav(readFileSync(path));
  if (a.sampleRate !== 16000) throw new Error(`${path}: expected 16 kHz, got ${a.sampleRate}`);
  return downmix(a.channels);
}

describe('mixed-radix FFT', () => {
  it('matches a direct DFT for lengths with factors 2, 3, 4, 5 and other primes', () => {
    const r = rng(7);
    for (const n of [1, 2, 3, 4, 5, 8, 12, 30, 49, 77, 128, 200, 400, 243]) {
      const re = Float64Array.from({ length: n }, r);
      const im = Float64Array.from({ length: n }, r);
      const [er, ei] = directDft(re, im);
      new ComplexFft(n).forward(re, im);
      let err = 0;
      for (let k = 0; k < n; k++) err = Math.max(err, Math.abs(re[k] - er[k]), Math.abs(im[k] - ei[k]));
      expect(err, `n = ${n}`).toBeLessThan(1e-11);
    }
  });

  it('gives the power spectrum of a real 400-sample frame', () => {
    const r = rng(3);
    const x = Float64Array.from({ length: 400 }, r);
    const [er, ei] = directDft(x.slice(), new Float64Array(400));
    const out = new Float64Array(201);
    new RealPowerFft(400).power(x, out);
    for (let k = 0; k <= 200; k++) expect(Math.abs(out[k] - (er[k] ** 2 + ei[k] ** 2))).toBeLessThan(1e-10);
  });
});

describe('Whisper log-mel front-end', () => {
  it('pads and truncates like the processors', () => {
    expect(whisperPaddedLength(515_000, { padToMultipleOf: 480_000 })).toEqual({ kept: 515_000, padded: 960_000 });
    expect(whisperPaddedLength(960_000, { padToMultipleOf: 480_000 })).toEqual({ kept: 960_000, padded: 960_000 });
    expect(whisperPaddedLength(700_000, { truncateTo: 480_000, padToLength: 480_000 })).toEqual({
      kept: 480_000,
      padded: 480_000,
    });
    expect(whisperPaddedLength(100_000, { truncateTo: 480_000, padToLength: 480_000 })).toEqual({
      kept: 100_000,
      padded: 480_000,
    });
    expect(whisperPaddedLength(6_000_123, { padToLength: 4_800_000 })).toEqual({ kept: 6_000_123, padded: 6_000_123 });
  });

  it('has Slaney filters with no empty band at 128 mels', () => {
    const fb = slaneyFilterbank(WHISPER_MEL);
    const bins = 201;
    for (let m = 0; m < 128; m++) {
      let peak = 0;
      for (let k = 0; k < bins; k++) peak = Math.max(peak, fb[m * bins + k]);
      expect(peak, `band ${m}`).toBeGreaterThan(0);
    }
  });

  it('gives 3000 frames for 30 s, counts valid frames, and takes well under a second for 30 s', () => {
    const r = rng(11);
    const x = Float32Array.from({ length: 480_000 }, () => 0.1 * r());
    const fe = new WhisperLogMel();
    fe.compute(x.subarray(0, 16000)); // warm-up (JIT)
    const t0 = performance.now();
    const out = fe.compute(x);
    const ms = performance.now() - t0;
    expect(out.frames).toBe(3000);
    expect(out.data.length).toBe(128 * 3000);
    expect(out.validFrames).toBe(3000);
    expect(ms).toBeLessThan(1000);
    console.log(`whisper-mel: 30 s of audio in ${ms.toFixed(0)} ms`);
    const short = fe.compute(x.subarray(0, 100_001), { truncateTo: 480_000, padToLength: 480_000 });
    expect(short.frames).toBe(3000);
    expect(short.validFrames).toBe(626); // ceil(100001 / 160)
    let max = -Infinity;
    let min = Infinity;
    for (const v of short.data) {
      max = Math.max(max, v);
      min = Math.min(min, v);
    }
    expect(max - min).toBeLessThanOrEqual(2 + 1e-6); // the (max − 8) clamp, divided by 4
  });

  it('rejects bad parameters', () => {
    expect(() => new WhisperLogMel({ ...WHISPER_MEL, nFft: 401 })).toThrow(RangeError);
    expect(() => new WhisperLogMel({ ...WHISPER_MEL, fMax: 9000 })).toThrow(RangeError);
    expect(() => new WhisperLogMel({ ...WHISPER_MEL, nMels: 0 })).toThrow(RangeError);
  });

  it('matches the float64 numpy reference (training/hf/mel_ref.py) on real speech within 1e-5', (ctx) => {
    if (!existsSync(PY)) ctx.skip('needs /usr/bin/python3');
    try {
      execFileSync(PY, ['-c', 'import numpy'], { stdio: 'ignore' });
    } catch {
      ctx.skip('numpy is not installed for /usr/bin/python3');
    }
    const sample = loadWav('public/samples/sample1.wav'); // 32.2 s
    const slt = loadWav('public/test-sets/flite/flite_slt.wav'); // 61.9 s
    const kal = loadWav('public/test-sets/flite/flite_kal.wav'); // 91.7 s, not a multiple of the hop
    const cases: { name: string; x: Float32Array; pad: WhisperPadding; mels: number }[] = [
      { name: 'voxtral 32 s -> 60 s', x: sample, pad: { padToMultipleOf: 480_000 }, mels: 128 },
      { name: 'voxtral 62 s -> 90 s', x: slt, pad: { padToMultipleOf: 480_000 }, mels: 128 },
      { name: 'qwen2-audio clip cut at 30 s', x: slt, pad: { truncateTo: 480_000, padToLength: 480_000 }, mels: 128 },
      {
        name: 'qwen2-audio 7.3 s clip',
        x: slt.subarray(480_000, 480_000 + 116_789),
        pad: { truncateTo: 480_000, padToLength: 480_000 },
        mels: 128,
      },
      { name: 'omni 91.7 s, no truncation', x: kal, pad: { padToLength: 480_000 }, mels: 128 },
      { name: '80 mel bins', x: sample.subarray(0, 200_000), pad: {}, mels: 80 },
    ];
    const dir = mkdtempSync(join(tmpdir(), 'wnw-whisper-mel-'));
    try {
      for (const c of cases) {
        const inPath = join(dir, 'in.f32');
        const outPath = join(dir, 'out.f64');
        writeFileSync(inPath, new Uint8Array(c.x.buffer, c.x.byteOffset, c.x.byteLength));
        const args = [MEL_REF, '--samples', inPath, '--out', outPath, '--mels', String(c.mels)];
        if (c.pad.truncateTo !== undefined) args.push('--truncate', String(c.pad.truncateTo));
        if (c.pad.padToLength !== undefined) args.push('--pad-length', String(c.pad.padToLength));
        if (c.pad.padToMultipleOf !== undefined) args.push('--pad-multiple', String(c.pad.padToMultipleOf));
        execFileSync(PY, args, { stdio: ['ignore', 'inherit', 'pipe'] });
        const buf = readFileSync(outPath);
        const ref = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
        const got = new WhisperLogMel({ ...WHISPER_MEL, nMels: c.mels }).compute(c.x, c.pad);
        expect(got.data.length, c.name).toBe(ref.length);
        let err = 0;
        for (let i = 0; i < ref.length; i++) err = Math.max(err, Math.abs(got.data[i] - ref[i]));
        console.log(
          `whisper-mel vs numpy, ${c.name}: ${c.mels} x ${got.frames} frames, max abs error ${err.toExponential(2)}`,
        );
        expect(err, c.name).toBeLessThanOrEqual(1e-5);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
