import { afterEach, describe, expect, it } from 'vitest';
import { canDecodeCompressed, toMono16k, type AudioBufferLike } from '../../src/audio/decode.js';
import { downmix } from '../../src/audio/downmix.js';
import { encodeWav } from '../../src/audio/wav.js';
import { AudioError } from '../../src/errors.js';

function tone(n: number, f: number, sr: number, amp = 0.5): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = amp * Math.sin((2 * Math.PI * f * i) / sr);
  return x;
}

function bufferLike(channels: Float32Array[], sampleRate: number): AudioBufferLike {
  return {
    numberOfChannels: channels.length,
    sampleRate,
    length: channels[0].length,
    getChannelData: (i) => channels[i],
  };
}

function maxDiff(a: Float32Array, b: Float32Array, margin = 0): number {
  let e = 0;
  for (let i = margin; i < Math.min(a.length, b.length) - margin; i++) e = Math.max(e, Math.abs(a[i] - b[i]));
  return e;
}

describe('downmix', () => {
  it('averages channels and zeroes non-finite samples', () => {
    const m = downmix([Float32Array.from([1, 0.5, NaN]), Float32Array.from([0, -0.5, 0.2])]);
    expect(Array.from(m)).toEqual([0.5, 0, 0]);
    const mono = Float32Array.from([0.1, Infinity]);
    const out = downmix([mono]);
    expect(out[1]).toBe(0);
    expect(mono[1]).toBe(Infinity); // the caller's data is untouched
  });
});

describe('toMono16k', () => {
  afterEach(() => {
    delete (globalThis as Record<string, unknown>)['OfflineAudioContext'];
  });

  it('passes a Float32Array through as 16 kHz mono', async () => {
    const x = tone(1600, 440, 16000);
    expect(await toMono16k(x)).toBe(x);
  });

  it('decodes WAV bytes in every input form, downmixed and resampled', async () => {
    const sr = 44100;
    const a = tone(sr, 440, sr, 0.6);
    const b = tone(sr, 440, sr, 0.2);
    const expected = tone(16000, 440, 16000, 0.4);
    for (const enc of ['pcm16', 'pcm24', 'pcm32', 'float32'] as const) {
      const bytes = encodeWav([a, b], sr, enc);
      const forms: unknown[] = [bytes, bytes.slice().buffer, new Blob([bytes.slice()])];
      for (const form of forms) {
        const y = await toMono16k(form as ArrayBuffer);
        expect(y.length).toBe(16000);
        expect(maxDiff(y, expected, 100)).toBeLessThan(2e-3);
      }
    }
  });

  it('keeps a 16 kHz mono WAV sample-exact', async () => {
    const x = tone(800, 300, 16000);
    const y = await toMono16k(encodeWav([x], 16000, 'float32'));
    expect(Array.from(y)).toEqual(Array.from(x));
  });

  it('downmixes and resamples an AudioBuffer-like object', async () => {
    const y = await toMono16k(bufferLike([tone(48000, 1000, 48000, 0.5), tone(48000, 1000, 48000, 0.3)], 48000));
    expect(y.length).toBe(16000);
    expect(maxDiff(y, tone(16000, 1000, 16000, 0.4), 100)).toBeLessThan(2e-3);
  });

  it('uses OfflineAudioContext.decodeAudioData for non-WAV bytes when it exists', async () => {
    const calls: { rate: number; bytes: number }[] = [];
    class FakeOffline {
      constructor(
        _ch: number,
        _len: number,
        readonly rate: number,
      ) {}
      decodeAudioData(data: ArrayBuffer): Promise<AudioBufferLike> {
        calls.push({ rate: this.rate, bytes: data.byteLength });
        // A browser returns the decoded audio at the context's rate.
        return Promise.resolve(
          bufferLike([tone(this.rate, 500, this.rate), tone(this.rate, 500, this.rate)], this.rate),
        );
      }
    }
    (globalThis as Record<string, unknown>)['OfflineAudioContext'] = FakeOffline;
    expect(canDecodeCompressed()).toBe(true);
    const mp3ish = new TextEncoder().encode('ID3\x04 pretend this is an mp3');
    const y = await toMono16k(new Blob([mp3ish]));
    expect(calls).toEqual([{ rate: 16000, bytes: mp3ish.length }]);
    expect(y.length).toBe(16000);
    expect(maxDiff(y, tone(16000, 500, 16000))).toBeLessThan(1e-6);
  });

  it('wraps a Web Audio decoding failure (callback form too) in AudioError', async () => {
    (globalThis as Record<string, unknown>)['OfflineAudioContext'] = class {
      decodeAudioData(_d: ArrayBuffer, _ok: unknown, err: (e: unknown) => void): undefined {
        err(new Error('EncodingError: Unable to decode audio data'));
        return undefined;
      }
    };
    await expect(toMono16k(new Uint8Array([1, 2, 3, 4, 5]))).rejects.toThrow(/could not decode.*Unable to decode/);
  });

  it('decodes compressed formats in Node without Web Audio, and names them for bytes that are none', async () => {
    expect(canDecodeCompressed()).toBe(true);
    const err = await toMono16k(new TextEncoder().encode('OggS....not a wav')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AudioError);
    expect((err as AudioError).code).toBe('BAD_AUDIO');
    expect((err as Error).message).toMatch(/^Not an audio format wnw reads: .*MP3, FLAC.*Convert it/);
  });

  it('rejects empty input and empty audio', async () => {
    await expect(toMono16k(new Uint8Array(0))).rejects.toThrow(/empty/);
    await expect(toMono16k(new Float32Array(0))).rejects.toThrow(AudioError);
    await expect(toMono16k(encodeWav([new Float32Array(0)], 16000))).rejects.toThrow(/no samples/);
    await expect(toMono16k({} as ArrayBuffer)).rejects.toThrow(/Unsupported audio input/);
  });
});
