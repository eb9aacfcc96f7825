/**
 * Compressed audio in Node: MP3, FLAC, Ogg Vorbis and Ogg Opus through the wasm decoders of
 * the wasm-audio-decoders family, M4A/AAC through an ffmpeg on the PATH (there is no such
 * decoder for it). The container is told by its first bytes, never by the file name.
 * The file is fed in blocks, and each decoded block is downmixed and resampled before the
 * next, so the full-rate multichannel PCM is never held whole: only the 16 kHz mono result.
 * Loaded only in Node, by a dynamic import from decode.ts.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AudioError } from '../errors.js';
import { downmix } from './downmix.js';
import { StreamResampler } from './resample.js';

export type CompressedFormat = 'mp3' | 'flac' | 'ogg-vorbis' | 'ogg-opus' | 'm4a' | 'aac';

/** How messages name each format. */
const FORMAT_NAMES: Record<CompressedFormat, string> = {
  mp3: 'MP3',
  flac: 'FLAC',
  'ogg-vorbis': 'Ogg Vorbis',
  'ogg-opus': 'Ogg Opus',
  m4a: 'M4A/AAC',
  aac: 'AAC (ADTS)',
};

/** Bytes fed to a decoder at a time: a few seconds to a minute of audio, whatever the codec. */
const BLOCK_BYTES = 256 * 1024;

const ascii = (b: Uint8Array, at: number, len: number) => String.fromCharCode(...b.subarray(at, at + len));

/** An MPEG audio frame header (layer I-III) or an ADTS (AAC) one at `at`. */
function frameSync(b: Uint8Array, at: number): 'mp3' | 'aac' | undefined {
  if (at + 4 > b.length || b[at] !== 0xff || (b[at + 1] & 0xe0) !== 0xe0) return undefined;
  const layer = (b[at + 1] >> 1) & 3;
  if (layer === 0) return (b[at + 1] & 0xf6) === 0xf0 ? 'aac' : undefined;
  const version = (b[at + 1] >> 3) & 3;
  const bitrate = b[at + 2] >> 4;
  const rate = (b[at + 2] >> 2) & 3;
  return version !== 1 && bitrate !== 15 && rate !== 3 ? 'mp3' : undefined;
}

/** Where the data starts after any ID3v2 tags (before MP3 mostly, sometimes FLAC or ADTS). */
function afterId3(b: Uint8Array): number {
  let at = 0;
  while (at + 10 <= b.length && ascii(b, at, 3) === 'ID3') {
    const size =
      ((b[at + 6] & 0x7f) << 21) | ((b[at + 7] & 0x7f) << 14) | ((b[at + 8] & 0x7f) << 7) | (b[at + 9] & 0x7f);
    at += 10 + size + (b[at + 5] & 0x10 ? 10 : 0);
  }
  return at;
}

/** The format of a compressed file by its first bytes; undefined when none matches. */
export function sniffFormat(b: Uint8Array): CompressedFormat | undefined {
  const at = afterId3(b);
  if (ascii(b, at, 4) === 'fLaC') return 'flac';
  if (ascii(b, at + 4, 4) === 'ftyp') return 'm4a';
  if (ascii(b, at, 4) === 'OggS') {
    // The first page's first packet names the codec: OpusHead, \x01vorbis or \x7fFLAC.
    const body = at + 27 + (b[at + 26] ?? 0);
    if (ascii(b, body, 8) === 'OpusHead') return 'ogg-opus';
    if (ascii(b, body, 7) === '\x01vorbis') return 'ogg-vorbis';
    if (ascii(b, body, 5) === '\x7fFLAC') return 'flac';
    return undefined;
  }
  // An ID3 tag followed by no frame sync is still an MP3 in practice (padding or junk first,
  // which the decoder skips).
  return frameSync(b, at) ?? (at > 0 ? 'mp3' : undefined);
}

/**
 * The 16 kHz mono result, built block by block in one buffer. When it is full it grows to
 * `estimate`'s guess at the total (and by a tenth at least; a quarter with no guess); the
 * spare is cut at the end, so the peak is about one result, not the two that blocks joined
 * at the end would take.
 */
class MonoSink {
  private resampler: StreamResampler | undefined;
  private rate = 0;
  private buf = new Float32Array(0);
  private length = 0;
  /** The total to expect, given that `sofar` samples came out so far. */
  estimate: ((sofar: number) => number) | undefined;

  constructor(
    private readonly targetRate: number,
    private readonly format: string,
  ) {}

  push(channels: Float32Array[], sampleRate: number, samples: number): void {
    if (samples <= 0 || channels.length === 0) return;
    if (!this.resampler) {
      this.rate = sampleRate;
      this.resampler = new StreamResampler(sampleRate, this.targetRate);
    } else if (sampleRate !== this.rate) {
      throw new AudioError(
        `${this.format}: the sample rate changes inside the file (${this.rate} Hz, then ${sampleRate} Hz); convert it to WAV first.`,
      );
    }
    this.keep(this.resampler.push(downmix(channels.map((c) => c.subarray(0, samples)))));
  }

  private keep(x: Float32Array): void {
    const need = this.length + x.length;
    if (need > this.buf.length) {
      const size = Math.max(need, this.estimate?.(need) ?? 0, (this.estimate ? 1.1 : 1.25) * this.buf.length, 1 << 16);
      const grown = new Float32Array(Math.ceil(size));
      grown.set(this.buf.subarray(0, this.length));
      this.buf = grown;
    }
    this.buf.set(x, this.length);
    this.length = need;
  }

  /** The result: the buffer itself when under a tenth of it is spare, else a copy. */
  finish(): Float32Array {
    if (this.resampler) this.keep(this.resampler.end());
    return this.length >= 0.9 * this.buf.length ? this.buf.subarray(0, this.length) : this.buf.slice(0, this.length);
  }
}

interface Decoded {
  channelData: Float32Array[];
  samplesDecoded: number;
  sampleRate: number;
  /** outputSamples: the samples the decoder had put out when the error came. */
  errors: { message: string; outputSamples: number }[];
}

interface WasmDecoder {
  ready: Promise<void>;
  decode(block: Uint8Array): Decoded | Promise<Decoded>;
  flush?(): Promise<Decoded>;
  free(): void;
}

type WasmFormat = Exclude<CompressedFormat, 'm4a' | 'aac'>;

const WASM_DECODERS: Record<WasmFormat, () => Promise<WasmDecoder>> = {
  mp3: async () => new (await import('mpg123-decoder')).MPEGDecoder(),
  flac: async () => new (await import('@wasm-audio-decoders/flac')).FLACDecoder(),
  'ogg-opus': async () => new (await import('ogg-opus-decoder')).OggOpusDecoder(),
  'ogg-vorbis': async () => new (await import('@wasm-audio-decoders/ogg-vorbis')).OggVorbisDecoder(),
};

/**
 * True when the bytes end with a whole Ogg page flagged end-of-stream. The Ogg decoders'
 * flush() trusts the last page's granule position, and on a cut-off file pads the output
 * with made-up samples: for such a file the partial last page is left out instead.
 */
function endsWithOggEos(b: Uint8Array): boolean {
  for (let at = b.length - 27; at >= Math.max(0, b.length - 65536); at--) {
    if (b[at] !== 0x4f || ascii(b, at, 4) !== 'OggS') continue;
    const segments = b[at + 26];
    if (at + 27 + segments > b.length) return false;
    let size = 27 + segments;
    for (let i = 0; i < segments; i++) size += b[at + 27 + i];
    return at + size === b.length && (b[at + 5] & 4) !== 0;
  }
  return false;
}

/**
 * Native FLAC's layout: STREAMINFO's total sample count (0: not stated) and a copy of the
 * first frame's header. The decoder's parser emits a frame once it has seen the next frame's
 * header, and its flush() drops the last frame: fed after the data, the copy lets the last
 * frame out (and is itself dropped).
 */
function flacLayout(b: Uint8Array): { declared: number; trailer: Uint8Array } | undefined {
  let at = afterId3(b);
  if (ascii(b, at, 4) !== 'fLaC' || at + 8 + 18 > b.length) return undefined;
  const s = at + 8; // STREAMINFO, the first metadata block: total samples is 36 bits from byte 13's low nibble
  const declared =
    (b[s + 13] & 0x0f) * 2 ** 32 + ((b[s + 14] << 24) >>> 0) + (b[s + 15] << 16) + (b[s + 16] << 8) + b[s + 17];
  for (at += 4; at + 4 <= b.length;) {
    const last = b[at] & 0x80;
    at += 4 + ((b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]);
    if (last) break;
  }
  return { declared, trailer: b.slice(at, at + 16) };
}

/**
 * Runs a decoder call with console.error and console.warn muted: the decoders print every bad
 * frame there, and the AudioError already reports them, once.
 */
async function quietly<T>(call: () => T | Promise<T>): Promise<T> {
  const { error, warn } = console;
  console.error = console.warn = () => {};
  try {
    return await call();
  } finally {
    console.error = error;
    console.warn = warn;
  }
}

async function decodeWasm(bytes: Uint8Array, format: WasmFormat, targetRate: number): Promise<Float32Array> {
  const name = FORMAT_NAMES[format];
  let decoder: WasmDecoder;
  try {
    decoder = await WASM_DECODERS[format]();
    await decoder.ready;
  } catch (e) {
    throw new AudioError(`${name}: the decoder did not start (${e instanceof Error ? e.message : String(e)}).`);
  }
  const sink = new MonoSink(targetRate, name);
  const flac = format === 'flac' ? flacLayout(bytes) : undefined;
  let decoded = 0;
  const take = (r: Decoded) => {
    if (r.errors.length > 0) {
      const e = r.errors[0];
      const when =
        r.sampleRate > 0 && Number.isFinite(e.outputSamples)
          ? ` near ${(e.outputSamples / r.sampleRate).toFixed(1)} s`
          : '';
      throw new AudioError(
        `${name}: the file is corrupt: ${r.errors.length} frame${r.errors.length > 1 ? 's' : ''} could not be decoded ` +
          `(the first${when}: ${e.message.trim().replace(/\.$/, '')}).`,
      );
    }
    sink.push(r.channelData, r.sampleRate, r.samplesDecoded);
    decoded += r.samplesDecoded;
  };
  try {
    let read = 0;
    // The output so far scaled by the bytes left: within a few percent for a steady bitrate.
    sink.estimate = (sofar) => (1.02 * sofar * bytes.length) / read;
    for (let at = 0; at < bytes.length; at += BLOCK_BYTES) {
      read = Math.min(bytes.length, at + BLOCK_BYTES);
      take(await quietly(() => decoder.decode(bytes.subarray(at, read))));
    }
    if (flac?.trailer.length) take(await quietly(() => decoder.decode(flac.trailer)));
    const ogg = format === 'ogg-opus' || format === 'ogg-vorbis';
    if (decoder.flush && (!ogg || endsWithOggEos(bytes))) take(await quietly(() => decoder.flush!()));
  } catch (e) {
    if (e instanceof AudioError) throw e;
    throw new AudioError(
      `${name}: the decoder failed (${e instanceof Error ? e.message : String(e)}); the file is corrupt or not ${name}.`,
    );
  } finally {
    decoder.free();
  }
  if (decoded === 0)
    throw new AudioError(`${name}: no audio could be decoded; the file is truncated, empty or not ${name}.`);
  // A FLAC decoder that loses sync says nothing and skips the rest: the count tells.
  if (flac && flac.declared > 0 && decoded < flac.declared) {
    throw new AudioError(
      `${name}: the file is truncated or corrupt: ${decoded} of the ${flac.declared} samples its header states could be decoded.`,
    );
  }
  return sink.finish();
}

/** The message for an ffmpeg that is not there. */
function ffmpegMissing(name: string): string {
  return (
    `${name}: decoding it needs ffmpeg, and none was found on the PATH. Install ffmpeg ` +
    '(apt-get install ffmpeg, brew install ffmpeg, or https://ffmpeg.org/download.html), or convert the file to WAV, FLAC or MP3.'
  );
}

/**
 * ffmpeg decodes and resamples; its float output is read as it comes. The bytes go through a
 * temporary file, not a pipe: an M4A's index (moov) is often at its end, which ffmpeg can
 * only reach by seeking.
 */
async function decodeFfmpeg(bytes: Uint8Array, format: 'm4a' | 'aac', targetRate: number): Promise<Float32Array> {
  const name = FORMAT_NAMES[format];
  const dir = await mkdtemp(join(tmpdir(), 'wnw-audio-'));
  try {
    const input = join(dir, `input.${format}`);
    await writeFile(input, bytes);
    const sink = new MonoSink(targetRate, name);
    let stderr = '';
    let carry: Uint8Array = new Uint8Array(0);
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        'ffmpeg',
        ['-nostdin', '-v', 'error', '-i', input, '-vn', '-f', 'f32le', '-ac', '1', '-ar', String(targetRate), 'pipe:1'],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.on('error', (e: NodeJS.ErrnoException) =>
        reject(
          e.code === 'ENOENT'
            ? new AudioError(ffmpegMissing(name))
            : new AudioError(`${name}: ffmpeg did not start (${e.message}).`),
        ),
      );
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
      child.stdout.on('data', (d: Buffer) => {
        // Float samples may straddle two reads.
        const all = carry.length ? Buffer.concat([carry, d]) : d;
        const whole = all.length - (all.length % 4);
        const samples = new Float32Array(whole / 4);
        new Uint8Array(samples.buffer).set(all.subarray(0, whole));
        carry = all.subarray(whole);
        sink.push([samples], targetRate, samples.length);
      });
      child.on('close', resolve);
    });
    if (code !== 0) {
      const why = stderr.trim().split('\n').pop() ?? '';
      throw new AudioError(
        `${name}: ffmpeg could not decode it (exit ${code}${why ? `: ${why}` : ''}); the file is corrupt or not ${name}.`,
      );
    }
    const out = sink.finish();
    if (out.length === 0)
      throw new AudioError(`${name}: no audio could be decoded; the file is truncated, empty or has no audio track.`);
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The formats this module reads, for messages. */
const NODE_FORMATS = 'WAV, MP3, FLAC, Ogg Vorbis, Ogg Opus and M4A/AAC';

/**
 * Compressed file bytes -> mono float32 at `targetRate`. Throws AudioError (BAD_AUDIO) that
 * names the format and what failed.
 */
export async function decodeCompressed(bytes: Uint8Array, targetRate: number): Promise<Float32Array> {
  const format = sniffFormat(bytes);
  if (!format) {
    throw new AudioError(
      `Not an audio format wnw reads: the file's first bytes match none of ${NODE_FORMATS}. ` +
        'Convert it, e.g. ffmpeg -i FILE -ac 1 -ar 16000 out.wav.',
    );
  }
  return format === 'm4a' || format === 'aac'
    ? decodeFfmpeg(bytes, format, targetRate)
    : decodeWasm(bytes, format, targetRate);
}
