/**
 * RIFF/WAVE parsing without dependencies: PCM 8/16/24/32-bit, IEEE float 32/64,
 * WAVE_FORMAT_EXTENSIBLE wrapping either, any sample rate and channel count.
 * Hand-written rather than a library because it is small, it must run in Node, the
 * browser and workers alike, and every failure has to become a plain-language AudioError.
 */
import { AudioError } from '../errors.js';

export interface DecodedAudio {
  sampleRate: number;
  /** One Float32Array per channel, samples in [-1, 1]. */
  channels: Float32Array[];
}

const FORMAT_PCM = 1;
const FORMAT_FLOAT = 3;
const FORMAT_ALAW = 6;
const FORMAT_MULAW = 7;
const FORMAT_EXTENSIBLE = 0xfffe;

function tag(v: DataView, off: number): string {
  return String.fromCharCode(v.getUint8(off), v.getUint8(off + 1), v.getUint8(off + 2), v.getUint8(off + 3));
}

function asBytes(data: ArrayBuffer | Uint8Array): Uint8Array {
  return data instanceof Uint8Array ? data : new Uint8Array(data);
}

/** True when the bytes start like a RIFF/WAVE (or RIFX, RF64) file. */
export function isWav(data: ArrayBuffer | Uint8Array): boolean {
  const b = asBytes(data);
  if (b.length < 12) return false;
  const v = new DataView(b.buffer, b.byteOffset, 12);
  const riff = tag(v, 0);
  return (riff === 'RIFF' || riff === 'RIFX' || riff === 'RF64') && tag(v, 8) === 'WAVE';
}

/**
 * Parses a WAV file. A data chunk that claims more bytes than the file holds (a
 * recording cut off, or a streamed header with size 0/0xFFFFFFFF) is read up to the
 * last whole frame present, as most players do.
 */
export function parseWav(data: ArrayBuffer | Uint8Array): DecodedAudio {
  const b = asBytes(data);
  if (b.length < 12) throw new AudioError(`The file is too short to be audio (${b.length} bytes).`);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const riff = tag(v, 0);
  if (riff === 'RIFX') throw new AudioError('Big-endian WAV (RIFX) is not supported; convert it to a standard WAV.');
  if (riff === 'RF64')
    throw new AudioError('RF64 WAV (over 4 GB) is not supported; split it or convert to a standard WAV.');
  if (riff !== 'RIFF' || tag(v, 8) !== 'WAVE') throw new AudioError('Not a WAV file (no RIFF/WAVE header).');

  let fmt: { format: number; channels: number; sampleRate: number; blockAlign: number; bits: number } | undefined;
  let dataOff = -1;
  let dataLen = 0;
  let off = 12;
  while (off + 8 <= b.length) {
    const id = tag(v, off);
    const size = v.getUint32(off + 4, true);
    const body = off + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + 16 > b.length) throw new AudioError('The WAV format chunk is truncated.');
      let format = v.getUint16(body, true);
      const channels = v.getUint16(body + 2, true);
      const sampleRate = v.getUint32(body + 4, true);
      const blockAlign = v.getUint16(body + 12, true);
      const bits = v.getUint16(body + 14, true);
      if (format === FORMAT_EXTENSIBLE) {
        // cbSize(2) validBits(2) channelMask(4) then the sub-format GUID, whose first two bytes are the format code.
        if (size < 40 || body + 26 > b.length) throw new AudioError('The WAV extensible format chunk is truncated.');
        format = v.getUint16(body + 24, true);
      }
      fmt = { format, channels, sampleRate, blockAlign, bits };
    } else if (id === 'data') {
      dataOff = body;
      dataLen = size === 0 || size === 0xffffffff ? b.length - body : size;
      break; // the data chunk is the last one we need; a truncated file may end inside it
    }
    off = body + size + (size & 1); // chunks are word-aligned
  }
  if (!fmt) throw new AudioError('The WAV file has no format chunk.');
  if (dataOff < 0) throw new AudioError('The WAV file has no audio data chunk.');
  const { format, channels, sampleRate, bits } = fmt;
  if (channels < 1) throw new AudioError('The WAV file declares 0 channels.');
  if (!(sampleRate >= 1000 && sampleRate <= 768000))
    throw new AudioError(`Unsupported WAV sample rate ${sampleRate} Hz.`);
  const bytesPer = bits >> 3;
  const supported =
    (format === FORMAT_PCM && (bits === 8 || bits === 16 || bits === 24 || bits === 32)) ||
    (format === FORMAT_FLOAT && (bits === 32 || bits === 64)) ||
    ((format === FORMAT_ALAW || format === FORMAT_MULAW) && bits === 8);
  if (!supported) {
    throw new AudioError(
      `Unsupported WAV encoding (format code ${format}, ${bits} bits). ` +
        'Supported: PCM 8/16/24/32-bit, float 32/64-bit, A-law, mu-law; convert other files (e.g. with ffmpeg or sox).',
    );
  }
  // Some writers put a wrong blockAlign; the sample layout is what matters.
  const frameBytes = bytesPer * channels;
  const avail = Math.min(dataLen, b.length - dataOff);
  const n = Math.floor(avail / frameBytes);
  const out: Float32Array[] = [];
  for (let c = 0; c < channels; c++) out.push(new Float32Array(n));
  const read = sampleReader(v, format, bits);
  for (let i = 0; i < n; i++) {
    const base = dataOff + i * frameBytes;
    for (let c = 0; c < channels; c++) out[c][i] = read(base + c * bytesPer);
  }
  return { sampleRate, channels: out };
}

function sampleReader(v: DataView, format: number, bits: number): (off: number) => number {
  if (format === FORMAT_FLOAT) {
    return bits === 32 ? (o) => v.getFloat32(o, true) : (o) => v.getFloat64(o, true);
  }
  if (format === FORMAT_ALAW) return (o) => alaw(v.getUint8(o)) / 32768;
  if (format === FORMAT_MULAW) return (o) => mulaw(v.getUint8(o)) / 32768;
  switch (bits) {
    case 8:
      return (o) => (v.getUint8(o) - 128) / 128;
    case 16:
      return (o) => v.getInt16(o, true) / 32768;
    case 24:
      return (o) => (v.getUint8(o) | (v.getUint8(o + 1) << 8) | (v.getInt8(o + 2) << 16)) / 8388608;
    default:
      return (o) => v.getInt32(o, true) / 2147483648;
  }
}

function mulaw(u: number): number {
  const x = ~u & 0xff;
  const t = (((x & 0x0f) << 3) + 0x84) << ((x & 0x70) >> 4);
  return x & 0x80 ? 0x84 - t : t - 0x84;
}

function alaw(a: number): number {
  const x = a ^ 0x55;
  const seg = (x & 0x70) >> 4;
  let t = (x & 0x0f) << 4;
  t = seg === 0 ? t + 8 : seg === 1 ? t + 0x108 : (t + 0x108) << (seg - 1);
  return x & 0x80 ? t : -t;
}

/**
 * Writes a WAV file (used by tests and tools). `encoding`: 'pcm16' | 'pcm24' | 'pcm32' |
 * 'float32'; channels are interleaved; PCM values are rounded and clipped.
 */
export function encodeWav(
  channels: Float32Array[],
  sampleRate: number,
  encoding: 'pcm8' | 'pcm16' | 'pcm24' | 'pcm32' | 'float32' = 'pcm16',
): Uint8Array<ArrayBuffer> {
  const nch = channels.length;
  const n = nch ? channels[0].length : 0;
  const bits = encoding === 'pcm8' ? 8 : encoding === 'pcm16' ? 16 : encoding === 'pcm24' ? 24 : 32;
  const bps = bits >> 3;
  const dataLen = n * nch * bps;
  const buf = new Uint8Array(44 + dataLen + (dataLen & 1));
  const v = new DataView(buf.buffer);
  const put = (o: number, s: string) => [...s].forEach((ch, i) => v.setUint8(o + i, ch.charCodeAt(0)));
  put(0, 'RIFF');
  v.setUint32(4, buf.length - 8, true);
  put(8, 'WAVE');
  put(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, encoding === 'float32' ? FORMAT_FLOAT : FORMAT_PCM, true);
  v.setUint16(22, nch, true);
  v.setUint32(24, sampleRate, true);
  v.setUint32(28, sampleRate * nch * bps, true);
  v.setUint16(32, nch * bps, true);
  v.setUint16(34, bits, true);
  put(36, 'data');
  v.setUint32(40, dataLen, true);
  const clip = (x: number, scale: number) => Math.max(-scale, Math.min(scale - 1, Math.round(x * scale)));
  let o = 44;
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < nch; c++, o += bps) {
      const x = channels[c][i];
      if (encoding === 'float32') v.setFloat32(o, x, true);
      else if (bits === 8) v.setUint8(o, clip(x, 128) + 128);
      else if (bits === 16) v.setInt16(o, clip(x, 32768), true);
      else if (bits === 32) v.setInt32(o, clip(x, 2147483648), true);
      else {
        const q = clip(x, 8388608);
        v.setUint8(o, q & 0xff);
        v.setUint8(o + 1, (q >> 8) & 0xff);
        v.setUint8(o + 2, (q >> 16) & 0xff);
      }
    }
  }
  return buf;
}
