import { describe, expect, it } from 'vitest';
import { StreamResampler, resample, resampledLength } from '../../src/audio/resample.js';

function tone(n: number, f: number, sr: number, amp = 0.5, phase = 0): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * Math.sin((2 * Math.PI * f * i) / sr + phase);
  return x;
}

/** Max abs error against the ideal tone, away from the zero-padded edges. */
function toneError(y: Float32Array, f: number, sr: number, amp: number, phase: number, margin = 200): number {
  let e = 0;
  for (let i = margin; i < y.length - margin; i++)
    e = Math.max(e, Math.abs(y[i] - amp * Math.sin((2 * Math.PI * f * i) / sr + phase)));
  return e;
}

function rms(y: Float32Array, margin = 200): number {
  let s = 0;
  for (let i = margin; i < y.length - margin; i++) s += y[i] * y[i];
  return Math.sqrt(s / (y.length - 2 * margin));
}

describe('resample', () => {
  it('returns the input itself when the rates match', () => {
    const x = tone(100, 440, 16000);
    expect(resample(x, 16000, 16000)).toBe(x);
  });

  it('has round(n · to / from) output samples', () => {
    for (const [n, from] of [
      [44100, 44100],
      [1000, 48000],
      [12345, 22050],
      [777, 8000],
      [5, 44056],
    ] as const) {
      expect(resample(new Float32Array(n), from, 16000).length).toBe(resampledLength(n, from, 16000));
      expect(resampledLength(n, from, 16000)).toBe(Math.round((n * 16000) / from));
    }
  });

  // 44056 Hz (ratio 2000/5507) exercises the rounded-phase path; the others are exact polyphase.
  for (const from of [44100, 48000, 22050, 32000, 8000, 11025, 44056, 96000]) {
    it(`keeps amplitude and phase of in-band tones: ${from} Hz -> 16 kHz`, () => {
      const n = from; // one second
      for (const f of [100, 1000, 3000, Math.min(6500, 0.42 * from)]) {
        const phase = 0.7;
        const y = resample(tone(n, f, from, 0.5, phase), from, 16000);
        expect(toneError(y, f, 16000, 0.5, phase)).toBeLessThan(2e-3);
      }
    });
  }

  it('suppresses tones above the new Nyquist instead of aliasing them (44.1k and 48k -> 16k)', () => {
    for (const from of [44100, 48000]) {
      for (const f of [8600, 9000, 12000, 15000]) {
        const y = resample(tone(from, f, from, 0.5), from, 16000);
        // An aliased tone would have RMS 0.35; -60 dB of the input is 3.5e-4.
        expect(rms(y)).toBeLessThan(3.5e-4);
      }
    }
  });

  it('keeps DC at unit gain and does not ring on silence', () => {
    const y = resample(new Float32Array(44100).fill(0.25), 44100, 16000);
    for (let i = 200; i < y.length - 200; i++) expect(Math.abs(y[i] - 0.25)).toBeLessThan(1e-5);
    const z = resample(new Float32Array(1000), 48000, 16000);
    expect(z.every((v) => v === 0)).toBe(true);
  });

  it('upsamples 8 kHz without imaging above 4 kHz', () => {
    const y = resample(tone(8000, 1000, 8000, 0.5), 8000, 16000);
    expect(toneError(y, 1000, 16000, 0.5, 0)).toBeLessThan(2e-3);
    // Energy above 4.2 kHz: project on a few image frequencies of the 1 kHz tone (7 kHz, 9 kHz -> 7 kHz at 16k).
    let re = 0;
    let im = 0;
    for (let i = 200; i < y.length - 200; i++) {
      re += y[i] * Math.cos((2 * Math.PI * 7000 * i) / 16000);
      im += y[i] * Math.sin((2 * Math.PI * 7000 * i) / 16000);
    }
    expect(Math.hypot(re, im) / ((y.length - 400) / 2)).toBeLessThan(1e-3);
  });

  it('rejects non-integer rates', () => {
    expect(() => resample(new Float32Array(4), 44100.5, 16000)).toThrow(RangeError);
    expect(() => resample(new Float32Array(4), 0, 16000)).toThrow(RangeError);
  });
});

describe('StreamResampler', () => {
  // Blocks of uneven sizes, some shorter than the filter and some empty.
  const blocks = [0, 1, 7, 300, 0, 4096, 5, 20000, 333];

  for (const from of [44100, 48000, 8000, 44056, 16000]) {
    it(`gives resample's output sample for sample, in blocks: ${from} Hz -> 16 kHz`, () => {
      const x = tone(from, 1234, from, 0.5, 0.3);
      for (let i = 0; i < x.length; i += 97) x[i] += 0.2; // broadband clicks
      const rs = new StreamResampler(from, 16000);
      const parts: Float32Array[] = [];
      let at = 0;
      for (let b = 0; at < x.length; b++) {
        const len = blocks[b % blocks.length];
        parts.push(rs.push(x.slice(at, at + len)));
        at += len;
      }
      parts.push(rs.end());
      const y = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
      let o = 0;
      for (const p of parts) y.set(p, (o += p.length) - p.length);
      expect(Array.from(y)).toEqual(Array.from(resample(x, from, 16000)));
    });
  }

  it('ends with nothing left for a stream of no samples', () => {
    const rs = new StreamResampler(48000, 16000);
    expect(rs.push(new Float32Array(0)).length).toBe(0);
    expect(rs.end().length).toBe(0);
  });
});
