/**
 * Compressed audio in Node (src/audio/node-decode.ts): files made at test time from one WAV
 * clip with sox and ffmpeg decode to 16 kHz mono close to the WAV's own samples, damaged
 * files fail with BAD_AUDIO naming their format, and the reference model hears a lossless
 * copy exactly as it hears the WAV.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { hzToMel, logMel } from '../../src/audio/mel.js';
import { sniffFormat } from '../../src/audio/node-decode.js';
import { parseConfig } from '../../src/model/config.js';
import { AudioError } from '../../src/errors.js';
import { loadTranscriber } from '../../src/index.js';
import { tempDir } from '../helpers/temp.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');
const CLIP = join(MODEL, 'fixtures', 'clip1.wav'); // 9 s of speech, 16 kHz mono

const dir = tempDir('wnw-formats-');
const at = (name: string) => join(dir, name);
const sox = (...args: string[]) => execFileSync('sox', args, { stdio: 'pipe' });
const ffmpeg = (...args: string[]) =>
  execFileSync('ffmpeg', ['-nostdin', '-v', 'error', '-y', ...args], { stdio: 'pipe' });

/** The files, by name: what made them and how they are encoded. */
const MADE: Record<string, () => void> = {
  'sox.flac': () => sox(CLIP, at('sox.flac')),
  'sox.mp3': () => sox(CLIP, '-C', '64', at('sox.mp3')), // LAME through sox, 16 kHz mono
  'sox-44k-stereo.mp3': () => sox(CLIP, '-C', '128', '-r', '44100', '-c', '2', at('sox-44k-stereo.mp3')),
  'sox.ogg': () => sox(CLIP, at('sox.ogg')), // Vorbis
  'ffmpeg.opus': () => ffmpeg('-i', CLIP, '-c:a', 'libopus', '-b:a', '48k', at('ffmpeg.opus')), // decoded at 48 kHz
  'ffmpeg-48k.m4a': () => ffmpeg('-i', CLIP, '-ar', '48000', '-c:a', 'aac', '-b:a', '96k', at('ffmpeg-48k.m4a')),
};

const bytes = (name: string) => new Uint8Array(readFileSync(at(name)));

/**
 * `name` decoded by ffmpeg to a float WAV at the file's own rate and channels. Opus through
 * libopus, the decoder the wasm one is built from: ffmpeg's own Opus decoder upsamples SILK
 * frames differently (10 dB apart on the waveform, though it sounds the same).
 */
function ffmpegDecoded(name: string): Uint8Array {
  ffmpeg(
    ...(name.endsWith('.opus') ? ['-c:a', 'libopus'] : []),
    '-i',
    at(name),
    '-c:a',
    'pcm_f32le',
    at(`${name}.ffmpeg.wav`),
  );
  return bytes(`${name}.ffmpeg.wav`);
}

/** `y` shifted by the lag (within ±100 ms) that aligns it best with `ref`: MP3 encoders add a delay. */
function aligned(ref: Float32Array, y: Float32Array): Float32Array {
  let best = { corr: -Infinity, lag: 0 };
  for (let lag = -1600; lag <= 1600; lag++) {
    let xy = 0;
    for (let i = 1600; i < ref.length - 1600; i += 4) xy += ref[i] * (y[i + lag] ?? 0);
    if (xy > best.corr) best = { corr: xy, lag };
  }
  if (best.lag >= 0) return y.subarray(best.lag);
  const out = new Float32Array(y.length - best.lag);
  out.set(y, -best.lag);
  return out;
}

/**
 * How `y`'s log-mel features (the model's input) agree with `ref`'s below 4 kHz, the band
 * every codec here keeps (MP3 at 16 kHz cuts the top): their correlation and mean difference.
 */
function melAgreement(ref: Float32Array, y: Float32Array): { corr: number; meanDiff: number } {
  const audio = parseConfig(JSON.parse(readFileSync(join(MODEL, 'config.json'), 'utf8'))).audio;
  const a = logMel(ref, audio);
  const b = logMel(aligned(ref, y), audio);
  const bands = Math.round((audio.nMels * hzToMel(4000)) / hzToMel(audio.fMax));
  const T = Math.min(a.frames, b.frames);
  let n = 0,
    sa = 0,
    sb = 0,
    sab = 0,
    saa = 0,
    sbb = 0;
  for (let m = 0; m < bands; m++) {
    for (let t = 0; t < T; t++) {
      const u = a.data[m * a.frames + t];
      const v = b.data[m * b.frames + t];
      n++;
      sa += u;
      sb += v;
      sab += u * v;
      saa += u * u;
      sbb += v * v;
    }
  }
  return {
    corr: (sab - (sa * sb) / n) / Math.sqrt((saa - (sa * sa) / n) * (sbb - (sb * sb) / n)),
    meanDiff: (sb - sa) / n,
  };
}

async function rejection(input: Uint8Array): Promise<AudioError> {
  const e = await toMono16k(input).catch((x: unknown) => x);
  expect(e).toBeInstanceOf(AudioError);
  expect((e as AudioError).code).toBe('BAD_AUDIO');
  return e as AudioError;
}

let wav: Float32Array;

beforeAll(async () => {
  for (const make of Object.values(MADE)) make();
  wav = await toMono16k(new Uint8Array(readFileSync(CLIP)));
});

describe('compressed audio in Node', () => {
  it('tells the format by its first bytes', () => {
    expect(Object.fromEntries(Object.keys(MADE).map((f) => [f, sniffFormat(bytes(f))]))).toEqual({
      'sox.flac': 'flac',
      'sox.mp3': 'mp3',
      'sox-44k-stereo.mp3': 'mp3',
      'sox.ogg': 'ogg-vorbis',
      'ffmpeg.opus': 'ogg-opus',
      'ffmpeg-48k.m4a': 'm4a',
    });
    const id3 = new Uint8Array([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 2, 0, 0, 0x66, 0x4c, 0x61, 0x43]); // a 2-byte tag, then fLaC
    expect(sniffFormat(id3)).toBe('flac');
    expect(sniffFormat(new Uint8Array([0xff, 0xf1, 0x50, 0x80]))).toBe('aac'); // ADTS
    expect(sniffFormat(new TextEncoder().encode('{"name": "wnw"}'))).toBeUndefined();
  });

  it("decodes FLAC to the WAV's samples, but for the decoder's int-to-float scale", async () => {
    const y = await toMono16k(bytes('sox.flac'));
    expect(y.length).toBe(wav.length);
    // The decoder divides 16-bit samples by 32767, the WAV reader by 32768: under 1 LSB apart.
    let worst = 0;
    for (let i = 0; i < y.length; i++) worst = Math.max(worst, Math.abs(y[i] - wav[i]));
    expect(worst).toBeLessThan(1 / 32768);
  });

  // Measured: correlation 0.989 (Vorbis) to 1.000 (MP3 at 128 kbps), mean difference under
  // 0.05. A wrong rate or a misplaced block drops the correlation far below 0.97; summed
  // instead of averaged channels shift the mean by 0.16.
  for (const name of ['sox.mp3', 'sox-44k-stereo.mp3', 'sox.ogg', 'ffmpeg.opus', 'ffmpeg-48k.m4a']) {
    it(`decodes ${name} to 16 kHz mono whose features match the WAV's`, async () => {
      const y = await toMono16k(bytes(name));
      expect(Math.abs(y.length - wav.length)).toBeLessThan(0.02 * wav.length);
      const { corr, meanDiff } = melAgreement(wav, y);
      expect(corr).toBeGreaterThan(0.97);
      expect(Math.abs(meanDiff)).toBeLessThan(0.1);
    });
  }

  // The same file decoded by ffmpeg (at its own rate and channels, then through the WAV
  // reader): the wasm decoders agree with it to rounding, 92 dB (Opus) to 135 dB measured.
  for (const name of ['sox.mp3', 'sox-44k-stereo.mp3', 'sox.ogg', 'ffmpeg.opus']) {
    it(`decodes ${name} as ffmpeg does, to rounding`, async () => {
      const y = await toMono16k(bytes(name));
      const ref = await toMono16k(ffmpegDecoded(name));
      expect(y.length).toBe(ref.length);
      let signal = 0;
      let noise = 0;
      for (let i = 0; i < y.length; i++) {
        signal += ref[i] ** 2;
        noise += (y[i] - ref[i]) ** 2;
      }
      expect(10 * Math.log10(signal / noise)).toBeGreaterThan(70);
    });
  }

  it('fails a file cut off inside its header with BAD_AUDIO naming the format', async () => {
    const names: Record<string, RegExp> = {
      'sox.flac': /^FLAC:/,
      'sox.mp3': /^MP3:/,
      'sox.ogg': /^Ogg Vorbis:/,
      'ffmpeg.opus': /^Ogg Opus:/,
      'ffmpeg-48k.m4a': /^M4A\/AAC:/,
    };
    for (const [name, format] of Object.entries(names)) {
      const e = await rejection(bytes(name).subarray(0, 100));
      expect(e.message, name).toMatch(format);
      expect(e.message, name).toMatch(/truncated|corrupt|could not decode/);
    }
  });

  it('fails a file with a damaged stretch with BAD_AUDIO naming the format', async () => {
    const names: Record<string, RegExp> = {
      'sox.flac': /^FLAC: the file is truncated or corrupt/,
      'sox.mp3': /^MP3: the file is corrupt/,
      'sox.ogg': /^Ogg Vorbis: the file is corrupt/,
      'ffmpeg.opus': /^Ogg Opus: the file is corrupt/,
    };
    for (const [name, message] of Object.entries(names)) {
      const b = bytes(name);
      for (let i = b.length >> 2; i < (b.length >> 2) + 3000; i++) b[i] = (i * 7919) & 255;
      expect((await rejection(b)).message, name).toMatch(message);
    }
  });

  it('reads a FLAC cut off mid-stream only as far as a truncation error', async () => {
    const b = bytes('sox.flac');
    expect((await rejection(b.subarray(0, b.length >> 1))).message).toMatch(
      /^FLAC: the file is truncated or corrupt: \d+ of the \d+ samples/,
    );
  });

  it('reads an Ogg file cut off mid-stream up to its last whole page, as a cut-off WAV is read', async () => {
    const b = bytes('ffmpeg.opus');
    const y = await toMono16k(b.subarray(0, b.length >> 1));
    expect(y.length).toBeGreaterThan(0.4 * wav.length);
    expect(y.length).toBeLessThan(0.6 * wav.length);
  });

  it('says to install ffmpeg for M4A when there is none on the PATH', async () => {
    const path = process.env.PATH;
    process.env.PATH = tempDir('wnw-no-ffmpeg-');
    try {
      const e = await rejection(bytes('ffmpeg-48k.m4a'));
      expect(e.message).toMatch(/^M4A\/AAC: decoding it needs ffmpeg, and none was found on the PATH\. Install ffmpeg/);
    } finally {
      process.env.PATH = path;
    }
  });

  it('names the formats it reads for a file that is none of them', async () => {
    expect((await rejection(new TextEncoder().encode('{"name": "wnw"}'))).message).toMatch(
      /^Not an audio format wnw reads: .*WAV, MP3, FLAC, Ogg Vorbis, Ogg Opus and M4A\/AAC/,
    );
  });
});

describe('the reference model on each format', () => {
  // The tiny reference model is fragile: lossy coding alone changes its transcript of this
  // clip. What the decoders owe is the transcript of the codec's output, which ffmpeg's
  // decoding of the same file gives.
  it("gives the WAV's tokens for FLAC, and ffmpeg's decoding's tokens for MP3 and Opus", async () => {
    const asr = await loadTranscriber({ model: MODEL, backend: 'cpu', policy: 'full' });
    try {
      const tokens = async (input: Uint8Array) => (await asr.transcribe(await toMono16k(input))).tokens;
      const ref = await tokens(new Uint8Array(readFileSync(CLIP)));
      expect(ref.length).toBeGreaterThan(10);
      expect(await tokens(bytes('sox.flac'))).toEqual(ref);
      for (const name of ['sox-44k-stereo.mp3', 'ffmpeg.opus']) {
        const got = await tokens(bytes(name));
        expect(got, name).toEqual(await tokens(ffmpegDecoded(name)));
        const same = got.length === ref.length && got.every((t, i) => t === ref[i]);
        console.info(
          `${name}: ${same ? 'the same tokens as the WAV' : `not the WAV's tokens (${got.length} tokens against ${ref.length})`}`,
        );
      }
    } finally {
      asr.dispose();
    }
  });
});
