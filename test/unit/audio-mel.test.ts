import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogMel, frameCount, hzToMel, melFilterbank, melToHz, type MelParams } from '../../src/audio/mel.js';
import { RealFft } from '../../src/audio/fft.js';
import { parseWav } from '../../src/audio/wav.js';
import { resample } from '../../src/audio/resample.js';
import { downmix } from '../../src/audio/downmix.js';
import { tempDir } from '../helpers/temp.js';

const P: MelParams = {
  sampleRate: 16000,
  nFft: 512,
  winLength: 400,
  hopLength: 160,
  nMels: 80,
  fMin: 0,
  fMax: 8000,
  melFloor: 1e-6,
  melMean: -4.5,
  melStd: 3.2,
};

function noise(n: number, seed = 1): Float32Array {
  let s = seed >>> 0;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    x[i] = (s / 2 ** 32 - 0.5) * 0.6 + 0.3 * Math.sin(i * 0.05);
  }
  return x;
}

/** The spec written out the slow, obvious way: explicit padding, direct DFT, dense filters. */
function naiveMel(x: Float32Array, p: MelParams): Float64Array[] {
  const pad = p.winLength / 2;
  const n = x.length;
  const padded: number[] = [];
  for (let i = pad; i >= 1; i--) padded.push(x[i]);
  for (let i = 0; i < n; i++) padded.push(x[i]);
  for (let i = n - 2; i >= n - 1 - pad; i--) padded.push(x[i]);
  const T = Math.floor(n / p.hopLength);
  const bins = p.nFft / 2 + 1;
  const mels: number[] = [];
  for (let i = 0; i < p.nMels + 2; i++)
    mels.push(hzToMel(p.fMin) + ((hzToMel(p.fMax) - hzToMel(p.fMin)) * i) / (p.nMels + 1));
  const hz = mels.map(melToHz);
  const out: Float64Array[] = [];
  for (let m = 0; m < p.nMels; m++) out.push(new Float64Array(T));
  for (let t = 0; t < T; t++) {
    const pw = new Float64Array(bins);
    for (let k = 0; k < bins; k++) {
      let re = 0;
      let im = 0;
      for (let j = 0; j < p.winLength; j++) {
        const v = padded[t * p.hopLength + j] * (0.5 - 0.5 * Math.cos((2 * Math.PI * j) / p.winLength));
        re += v * Math.cos((2 * Math.PI * k * j) / p.nFft);
        im -= v * Math.sin((2 * Math.PI * k * j) / p.nFft);
      }
      pw[k] = re * re + im * im;
    }
    for (let m = 0; m < p.nMels; m++) {
      let acc = 0;
      for (let k = 0; k < bins; k++) {
        const f = (k * p.sampleRate) / p.nFft;
        const up = (f - hz[m]) / (hz[m + 1] - hz[m]);
        const down = (hz[m + 2] - f) / (hz[m + 2] - hz[m + 1]);
        acc += Math.max(0, Math.min(up, down)) * pw[k];
      }
      out[m][t] = (Math.log(acc + p.melFloor) - p.melMean) / p.melStd;
    }
  }
  return out;
}

describe('RealFft', () => {
  it('matches a direct DFT power spectrum', () => {
    for (const size of [8, 64, 512]) {
      const x = Float64Array.from(noise(size, size));
      const out = new Float64Array(size / 2 + 1);
      new RealFft(size).power(x, out);
      for (let k = 0; k <= size / 2; k++) {
        let re = 0;
        let im = 0;
        for (let j = 0; j < size; j++) {
          re += x[j] * Math.cos((2 * Math.PI * k * j) / size);
          im -= x[j] * Math.sin((2 * Math.PI * k * j) / size);
        }
        expect(out[k]).toBeCloseTo(re * re + im * im, 8);
      }
    }
  });
});

describe('LogMel', () => {
  it('has T = floor(samples / hop) frames in mel-major layout', () => {
    const lm = new LogMel(P);
    for (const n of [0, 159, 160, 161, 16000, 16159]) {
      expect(lm.frames(n)).toBe(Math.floor(n / 160));
      expect(frameCount(n, 160)).toBe(Math.floor(n / 160));
    }
    expect(lm.compute(new Float32Array(16000)).length).toBe(80 * 100);
  });

  it('matches a naive DFT implementation of the spec, edges included', () => {
    const x = noise(160 * 23 + 77, 7);
    const ref = naiveMel(x, P);
    const got = new LogMel(P).compute(x);
    const T = ref[0].length;
    let maxErr = 0;
    for (let m = 0; m < P.nMels; m++)
      for (let t = 0; t < T; t++) maxErr = Math.max(maxErr, Math.abs(got[m * T + t] - ref[m][t]));
    expect(maxErr).toBeLessThan(1e-5);
  });

  it('computes any frame range identically to the whole', () => {
    const x = noise(16000, 3);
    const lm = new LogMel(P);
    const all = lm.compute(x);
    const part = lm.compute(x, { start: 37, end: 61 });
    for (let m = 0; m < 80; m++) for (let t = 0; t < 24; t++) expect(part[m * 24 + t]).toBe(all[m * 100 + 37 + t]);
  });

  it('puts a pure tone in the mel band that contains it', () => {
    const lm = new LogMel(P);
    const fb = melFilterbank(P);
    const bins = 257;
    for (const f of [250, 1000, 3000, 6500]) {
      const x = new Float32Array(16000);
      for (let i = 0; i < x.length; i++) x[i] = 0.5 * Math.sin((2 * Math.PI * f * i) / 16000);
      const mel = lm.compute(x, { normalize: false });
      const t = 50;
      let best = 0;
      for (let m = 1; m < 80; m++) if (mel[m * 100 + t] > mel[best * 100 + t]) best = m;
      // The expected band: the filter with the largest weight at the tone's FFT bin.
      const k = Math.round((f * 512) / 16000);
      let expected = 0;
      for (let m = 1; m < 80; m++) if (fb[m * bins + k] > fb[expected * bins + k]) expected = m;
      expect(Math.abs(best - expected)).toBeLessThanOrEqual(1);
    }
  });

  it('gives ln(melFloor) on silence and is fast (5 min of audio well under 15 s on a shared 2-core machine)', () => {
    const lm = new LogMel({ ...P, melMean: 0, melStd: 1 });
    const sil = lm.compute(new Float32Array(3200));
    for (const v of sil) expect(v).toBeCloseTo(Math.log(1e-6), 5);
    const x = noise(16000 * 300, 5);
    const t0 = performance.now();
    lm.compute(x);
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(15_000);
  });

  it('matches training/common.py log_mel (numpy) when python3 + numpy are available', (ctx) => {
    const py = '/usr/bin/python3';
    const common = join(process.cwd(), 'training', 'common.py');
    if (!existsSync(py) || !existsSync(common)) ctx.skip('needs /usr/bin/python3 and training/common.py');
    try {
      execFileSync(py, ['-c', 'import numpy'], { stdio: 'ignore' });
    } catch {
      ctx.skip('numpy is not installed for /usr/bin/python3');
    }
    const dir = tempDir('wnw-mel-');
    const check = (x: Float32Array, label: string) => {
      writeFileSync(join(dir, 'x.f32'), new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
      const script = [
        'import sys, numpy as np',
        `sys.path.insert(0, ${JSON.stringify(join(process.cwd(), 'training'))})`,
        'from common import log_mel',
        `x = np.fromfile(${JSON.stringify(join(dir, 'x.f32'))}, dtype="<f4")`,
        `log_mel(x).astype("<f4").tofile(${JSON.stringify(join(dir, 'mel.f32'))})`,
      ].join('\n');
      execFileSync(py, ['-c', script], { stdio: 'inherit' });
      const buf = readFileSync(join(dir, 'mel.f32'));
      const ref = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
      const got = new LogMel({ ...P, melMean: 0, melStd: 1 }).compute(x);
      expect(got.length, label).toBe(ref.length);
      let maxErr = 0;
      for (let i = 0; i < ref.length; i++) maxErr = Math.max(maxErr, Math.abs(got[i] - ref[i]));
      // Both sides work in float64 and round once to float32: observed bit-identical.
      expect(maxErr, label).toBeLessThan(1e-4);
    };
    check(noise(16000 * 3 + 123, 11), 'synthetic');
    // Real speech (with its near-silent stretches at the floor) when the shipped clip is there.
    const clip = join(process.cwd(), 'public', 'models', 'wnw-ref', 'fixtures', 'clip1.wav');
    if (existsSync(clip)) {
      const wav = parseWav(readFileSync(clip));
      check(resample(downmix(wav.channels), wav.sampleRate, 16000), 'clip1.wav');
    }
  });
});
