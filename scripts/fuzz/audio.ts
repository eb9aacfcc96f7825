/**
 * Audio a user might hand over, broken in the ways files break: WAV headers with absurd
 * fields (1 Hz or 4 GHz rates, 0 or 64 channels, 7-bit or 8-bit samples, sizes far past
 * the file), cut or garbage data, NaN and Inf floats, other containers, empty input, and
 * raw Float32Arrays holding non-finite samples.
 */
import { encodeWav } from '../../src/audio/wav.js';
import { flipBytes, type Dice } from './random.js';
import type { AudioInput } from '../../src/index.js';

const ENCODINGS = ['pcm8', 'pcm16', 'pcm24', 'pcm32', 'float32'] as const;

function tone(seconds: number, rate: number, channels: number): Float32Array[] {
  const n = Math.max(0, Math.round(seconds * rate));
  return Array.from({ length: channels }, (_, ch) => {
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = 0.3 * Math.sin((2 * Math.PI * (220 + 50 * ch) * i) / rate);
    return x;
  });
}

/** Byte offset of a chunk's id in a WAV written by encodeWav (fmt at 12, data after fmt). */
function chunkAt(b: Uint8Array, id: string): number {
  for (let i = 12; i + 8 <= b.length;) {
    const name = String.fromCharCode(b[i], b[i + 1], b[i + 2], b[i + 3]);
    if (name === id) return i;
    i += 8 + new DataView(b.buffer, b.byteOffset).getUint32(i + 4, true);
  }
  return -1;
}

function wavMutation(d: Dice): { input: AudioInput; what: string } {
  const rate = d.pick([8000, 16000, 22050, 44100, 48000]);
  const channels = d.pick([1, 1, 2, 3, 64]);
  const seconds = channels > 8 ? 0.5 : d.pick([0.3, 1, 2]);
  const enc = d.pick(ENCODINGS);
  const b = encodeWav(tone(seconds, rate, channels), rate, enc);
  const v = new DataView(b.buffer);
  const fmt = chunkAt(b, 'fmt ');
  const data = chunkAt(b, 'data');
  const field = d.pick([
    'rate',
    'channels',
    'bits',
    'format',
    'riff-size',
    'data-size',
    'fmt-size',
    'block-align',
    'truncate',
    'garbage',
    'nan-floats',
    'none',
  ]);
  switch (field) {
    case 'rate':
      v.setUint32(fmt + 12, d.pick([0, 1, 2, 7, 100, 4_000_000_000, 0xffffffff]), true);
      break;
    case 'channels':
      v.setUint16(fmt + 10, d.pick([0, 64, 255, 0xffff]), true);
      break;
    case 'bits':
      v.setUint16(fmt + 22, d.pick([0, 1, 7, 8, 12, 20, 64, 0xffff]), true);
      break;
    case 'format':
      v.setUint16(fmt + 8, d.pick([0, 2, 3, 6, 7, 0xfffe, 0x1234]), true);
      break;
    case 'riff-size':
      v.setUint32(4, d.pick([0, 4, 0xffffffff, 0x7fffffff]), true);
      break;
    case 'data-size':
      v.setUint32(data + 4, d.pick([0, 1, 3, 0x7fffffff, 0xffffffff, 0xfffffff0]), true);
      break;
    case 'fmt-size':
      v.setUint32(fmt + 4, d.pick([0, 2, 14, 18, 40, 0xffffffff]), true);
      break;
    case 'block-align':
      v.setUint16(fmt + 20, d.pick([0, 1, 3, 0xffff]), true);
      break;
    case 'truncate':
      return { input: b.slice(0, d.int(0, Math.min(b.length, data + 12))), what: `WAV ${enc} cut` };
    case 'garbage':
      return { input: flipBytes(d, b, d.int(1, 40)), what: `WAV ${enc} with flipped bytes` };
    case 'nan-floats': {
      const f = encodeWav(tone(seconds, rate, 1), rate, 'float32');
      const fv = new DataView(f.buffer);
      const start = chunkAt(f, 'data') + 8;
      for (let i = start; i + 4 <= f.length; i += 4 * d.int(1, 50))
        fv.setFloat32(i, d.pick([NaN, Infinity, -Infinity, 3.4e38]), true);
      return { input: f, what: 'float32 WAV with NaN/Inf samples' };
    }
  }
  return { input: b, what: `WAV ${enc} ${rate} Hz ${channels} ch, ${field}` };
}

const MAGIC = [
  'OggS',
  'fLaC',
  'ID3\x03',
  '\xff\xfb\x90\x00',
  'FORM',
  'RIFF\0\0\0\0AVI ',
  'RF64',
  '\x1aE\xdf\xa3',
  '....ftypM4A ',
];

/** One audio input and a few words for the report. */
export function fuzzAudio(d: Dice): { input: AudioInput; what: string } {
  const kind = d.pick(['wav', 'wav', 'wav', 'wav', 'container', 'empty', 'random', 'float32', 'buffer']);
  switch (kind) {
    case 'container': {
      const magic = d.pick(MAGIC);
      const b = new Uint8Array(d.int(4, 4096));
      for (let i = 0; i < b.length; i++) b[i] = i < magic.length ? magic.charCodeAt(i) : d.int(0, 255);
      return { input: b, what: `${JSON.stringify(magic)} container` };
    }
    case 'empty':
      return { input: d.pick([new Uint8Array(0), new ArrayBuffer(0), new Float32Array(0)]), what: 'empty input' };
    case 'random': {
      const b = new Uint8Array(d.int(1, 2000));
      for (let i = 0; i < b.length; i++) b[i] = d.int(0, 255);
      return { input: b, what: 'random bytes' };
    }
    case 'float32': {
      const x = tone(d.pick([0.01, 0.5, 2]), 16000, 1)[0];
      const bad = d.pick([NaN, Infinity, -Infinity, 1e30, 0]);
      for (let i = 0; i < x.length; i += d.int(1, 400)) x[i] = bad;
      return { input: x, what: `Float32Array with ${bad} samples` };
    }
    case 'buffer':
      return { input: encodeWav(tone(1, 16000, 1), 16000, 'pcm16').buffer, what: 'ArrayBuffer WAV' };
    default:
      return wavMutation(d);
  }
}
