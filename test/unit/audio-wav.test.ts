import { describe, expect, it } from 'vitest';
import { encodeWav, isWav, parseWav } from '../../src/audio/wav.js';
import { AudioError } from '../../src/errors.js';

function tone(n: number, f: number, sr: number, amp = 0.5, phase = 0): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * Math.sin((2 * Math.PI * f * i) / sr + phase);
  return x;
}

/** A WAV built byte by byte, to test what encodeWav never writes (extensible, extra chunks, odd sizes). */
function rawWav(opts: {
  format: number;
  bits: number;
  channels: number;
  rate: number;
  data: Uint8Array;
  extensibleSub?: number;
  extraChunk?: Uint8Array;
  dataSize?: number;
}): Uint8Array {
  const parts: number[] = [];
  const u32 = (v: number) => parts.push(v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >>> 24) & 0xff);
  const u16 = (v: number) => parts.push(v & 0xff, (v >> 8) & 0xff);
  const str = (s: string) => [...s].forEach((c) => parts.push(c.charCodeAt(0)));
  str('RIFF');
  u32(0); // patched below
  str('WAVE');
  if (opts.extraChunk) {
    str('LIST');
    u32(opts.extraChunk.length);
    parts.push(...opts.extraChunk);
    if (opts.extraChunk.length & 1) parts.push(0);
  }
  const ext = opts.extensibleSub !== undefined;
  str('fmt ');
  u32(ext ? 40 : 16);
  u16(ext ? 0xfffe : opts.format);
  u16(opts.channels);
  u32(opts.rate);
  u32((opts.rate * opts.channels * opts.bits) / 8);
  u16((opts.channels * opts.bits) / 8);
  u16(opts.bits);
  if (ext) {
    u16(22);
    u16(opts.bits);
    u32(0);
    u16(opts.extensibleSub!);
    for (let i = 0; i < 14; i++) parts.push(0);
  }
  str('data');
  u32(opts.dataSize ?? opts.data.length);
  parts.push(...opts.data);
  const b = Uint8Array.from(parts);
  new DataView(b.buffer).setUint32(4, b.length - 8, true);
  return b;
}

describe('WAV', () => {
  const sr = 22050;
  const left = tone(1000, 440, sr, 0.7);
  const right = tone(1000, 660, sr, 0.4, 1);

  for (const [enc, tol] of [
    ['pcm8', 1 / 127],
    ['pcm16', 1 / 32767],
    ['pcm24', 1 / 8388607],
    ['pcm32', 1e-7],
    ['float32', 0],
  ] as const) {
    it(`round-trips ${enc} stereo`, () => {
      const bytes = encodeWav([left, right], sr, enc);
      expect(isWav(bytes)).toBe(true);
      const w = parseWav(bytes);
      expect(w.sampleRate).toBe(sr);
      expect(w.channels.length).toBe(2);
      expect(w.channels[0].length).toBe(1000);
      for (let i = 0; i < 1000; i++) {
        expect(Math.abs(w.channels[0][i] - left[i])).toBeLessThanOrEqual(tol + 1e-9);
        expect(Math.abs(w.channels[1][i] - right[i])).toBeLessThanOrEqual(tol + 1e-9);
      }
    });
  }

  it('decodes exact PCM16 and PCM24 extremes', () => {
    const d16 = new Uint8Array(new Int16Array([-32768, 32767, 0, -1]).buffer);
    const w16 = parseWav(rawWav({ format: 1, bits: 16, channels: 1, rate: 16000, data: d16 }));
    expect(Array.from(w16.channels[0])).toEqual([-1, 32767 / 32768, 0, -1 / 32768]);
    const d24 = Uint8Array.from([0x00, 0x00, 0x80, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff]);
    const w24 = parseWav(rawWav({ format: 1, bits: 24, channels: 1, rate: 16000, data: d24 }));
    expect(w24.channels[0][0]).toBe(-1);
    expect(w24.channels[0][1]).toBeCloseTo(8388607 / 8388608, 12);
    expect(w24.channels[0][2]).toBe(-1 / 8388608);
  });

  it('reads WAVE_FORMAT_EXTENSIBLE (float and PCM), skips other chunks with odd sizes', () => {
    const f = new Float32Array([0.25, -0.5, 1, 0]);
    const wf = parseWav(
      rawWav({
        format: 3,
        bits: 32,
        channels: 2,
        rate: 48000,
        data: new Uint8Array(f.buffer),
        extensibleSub: 3,
        extraChunk: Uint8Array.from([1, 2, 3]),
      }),
    );
    expect(wf.sampleRate).toBe(48000);
    expect(Array.from(wf.channels[0])).toEqual([0.25, 1]);
    expect(Array.from(wf.channels[1])).toEqual([-0.5, 0]);
    const p = new Int16Array([16384, -16384]);
    const wp = parseWav(
      rawWav({ format: 1, bits: 16, channels: 1, rate: 8000, data: new Uint8Array(p.buffer), extensibleSub: 1 }),
    );
    expect(Array.from(wp.channels[0])).toEqual([0.5, -0.5]);
  });

  it('reads float64 and mu-law / A-law', () => {
    const d = new Float64Array([0.125, -0.75]);
    expect(
      Array.from(
        parseWav(rawWav({ format: 3, bits: 64, channels: 1, rate: 16000, data: new Uint8Array(d.buffer) })).channels[0],
      ),
    ).toEqual([0.125, -0.75]);
    // G.711: 0xFF / 0xD5 are the codes for (near) zero; 0x80 / 0xAA the positive maxima.
    const mu = parseWav(
      rawWav({ format: 7, bits: 8, channels: 1, rate: 8000, data: Uint8Array.from([0xff, 0x80, 0x00]) }),
    ).channels[0];
    expect(mu[0]).toBe(0);
    expect(mu[1]).toBeCloseTo(32124 / 32768, 6);
    expect(mu[2]).toBeCloseTo(-32124 / 32768, 6);
    const al = parseWav(
      rawWav({ format: 6, bits: 8, channels: 1, rate: 8000, data: Uint8Array.from([0xd5, 0xaa, 0x2a]) }),
    ).channels[0];
    expect(Math.abs(al[0])).toBeLessThan(1e-3);
    expect(al[1]).toBeCloseTo(32256 / 32768, 6);
    expect(al[2]).toBeCloseTo(-32256 / 32768, 6);
  });

  it('reads a truncated data chunk up to the last whole frame', () => {
    const full = encodeWav([left, right], sr, 'pcm16');
    const cut = full.subarray(0, 44 + 4 * 100 + 3); // 100 whole stereo frames and 3 stray bytes
    const w = parseWav(cut);
    expect(w.channels[0].length).toBe(100);
    const streamed = rawWav({
      format: 1,
      bits: 16,
      channels: 1,
      rate: 16000,
      data: new Uint8Array(20),
      dataSize: 0xffffffff,
    });
    expect(parseWav(streamed).channels[0].length).toBe(10);
  });

  it('rejects what it cannot read with AudioError and a reason', () => {
    const cases: [Uint8Array, RegExp][] = [
      [new Uint8Array(4), /too short/],
      [new TextEncoder().encode('ID3\x03 this is an mp3 file..'), /Not a WAV/],
      [rawWav({ format: 2, bits: 4, channels: 1, rate: 16000, data: new Uint8Array(8) }), /Unsupported WAV encoding/],
      [rawWav({ format: 1, bits: 16, channels: 1, rate: 12, data: new Uint8Array(8) }), /sample rate/],
      [encodeWav([left], sr).subarray(0, 36), /no audio data|no format/],
    ];
    for (const [bytes, msg] of cases) {
      expect(() => parseWav(bytes)).toThrow(AudioError);
      expect(() => parseWav(bytes)).toThrow(msg);
    }
  });

  it('parses from a Uint8Array view with an offset into a larger buffer', () => {
    const bytes = encodeWav([left], sr, 'pcm16');
    const big = new Uint8Array(bytes.length + 13);
    big.set(bytes, 13);
    const w = parseWav(big.subarray(13));
    expect(w.channels[0].length).toBe(1000);
    expect(Math.abs(w.channels[0][10] - left[10])).toBeLessThan(1e-4);
  });
});
