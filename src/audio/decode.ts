/**
 * Any accepted input -> mono float32 at the model's rate. WAV is parsed here (same
 * result in Node, the browser and workers); anything else goes to the Web Audio API's
 * decodeAudioData when the environment has it (main browser thread), which also
 * resamples to the context's rate, and in Node to node-decode.ts (MP3, FLAC, Ogg Vorbis,
 * Ogg Opus, M4A/AAC) through the Node entry (platform/host.ts), so a page's bundle holds none of its decoders.
 */
import { AudioError } from '../errors.js';
import { isWav, parseWav } from './wav.js';
import { resample } from './resample.js';
import { downmix } from './downmix.js';
import { isNode, nodeHost } from '../platform/host.js';

/** An AudioBuffer or anything shaped like one (tests, Node). */
export interface AudioBufferLike {
  numberOfChannels: number;
  sampleRate: number;
  length: number;
  getChannelData(i: number): Float32Array;
}

export type AudioSource = ArrayBuffer | Uint8Array | Blob | Float32Array | AudioBufferLike;

function isAudioBufferLike(x: unknown): x is AudioBufferLike {
  return (
    typeof x === 'object' &&
    x !== null &&
    typeof (x as AudioBufferLike).getChannelData === 'function' &&
    typeof (x as AudioBufferLike).numberOfChannels === 'number' &&
    typeof (x as AudioBufferLike).sampleRate === 'number'
  );
}

function fromAudioBuffer(b: AudioBufferLike, targetRate: number): Float32Array {
  if (b.numberOfChannels < 1) throw new AudioError('The audio has no channels.');
  const chans: Float32Array[] = [];
  for (let c = 0; c < b.numberOfChannels; c++) chans.push(b.getChannelData(c));
  const sr = Math.round(b.sampleRate);
  return resample(downmix(chans), sr, targetRate);
}

type OfflineCtor = new (
  channels: number,
  length: number,
  sampleRate: number,
) => {
  decodeAudioData(
    data: ArrayBuffer,
    ok?: (b: AudioBufferLike) => void,
    err?: (e: unknown) => void,
  ): Promise<AudioBufferLike> | undefined;
};

/** The Web Audio decoder of this environment, if any (absent in Node and in workers). */
function offlineAudioContext(): OfflineCtor | undefined {
  const g = globalThis as unknown as { OfflineAudioContext?: OfflineCtor; webkitOfflineAudioContext?: OfflineCtor };
  return g.OfflineAudioContext ?? g.webkitOfflineAudioContext;
}

/** True when non-WAV formats (MP3, OGG, FLAC, M4A, …) can be decoded here. */
export function canDecodeCompressed(): boolean {
  return offlineAudioContext() !== undefined || isNode();
}

async function decodeWithWebAudio(bytes: Uint8Array, targetRate: number): Promise<Float32Array> {
  const Ctx = offlineAudioContext();
  if (!Ctx && isNode()) return nodeHost('decoding compressed audio').decodeCompressed(bytes, targetRate);
  if (!Ctx) {
    throw new AudioError(
      'This file is not a WAV, and this environment has no Web Audio decoder (a Web Worker). ' +
        'Convert it to WAV, or decode it on the page and pass an AudioBuffer or a 16 kHz Float32Array.',
    );
  }
  // decodeAudioData detaches its argument: hand it a copy.
  const copy = bytes.slice().buffer;
  const ctx = new Ctx(1, 1, targetRate);
  let decoded: AudioBufferLike;
  try {
    // Older Safari only has the callback form; newer browsers return a promise too.
    decoded = await new Promise<AudioBufferLike>((resolve, reject) => {
      const p = ctx.decodeAudioData(copy, resolve, reject);
      if (p && typeof p.then === 'function') p.then(resolve, reject);
    });
  } catch (e) {
    throw new AudioError(
      `The browser could not decode this audio file (${e instanceof Error ? e.message : String(e)}). Try WAV, MP3, OGG or M4A.`,
    );
  }
  return fromAudioBuffer(decoded, targetRate);
}

async function bytesOf(input: ArrayBuffer | Uint8Array | Blob): Promise<Uint8Array> {
  if (input instanceof Uint8Array) return input;
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  return new Uint8Array(await input.arrayBuffer());
}

/**
 * Mono float32 samples at `targetRate` (the model's audio.sampleRate, 16 kHz).
 * A Float32Array is taken as already mono at `targetRate` and returned as is; an
 * AudioBuffer(-like) is downmixed and resampled; bytes and Blobs are decoded (WAV
 * anywhere, other formats where the Web Audio API exists and in Node). Throws AudioError on
 * empty, undecodable or unsupported input.
 */
export async function toMono16k(input: AudioSource, targetRate = 16000): Promise<Float32Array> {
  let out: Float32Array;
  if (input instanceof Float32Array) {
    out = input;
  } else if (isAudioBufferLike(input)) {
    out = fromAudioBuffer(input, targetRate);
  } else if (
    input instanceof ArrayBuffer ||
    input instanceof Uint8Array ||
    (typeof Blob !== 'undefined' && input instanceof Blob)
  ) {
    const bytes = await bytesOf(input);
    if (bytes.length === 0) throw new AudioError('The audio file is empty.');
    if (isWav(bytes)) {
      const wav = parseWav(bytes);
      out = resample(downmix(wav.channels), wav.sampleRate, targetRate);
    } else {
      out = await decodeWithWebAudio(bytes, targetRate);
    }
  } else {
    throw new AudioError(
      'Unsupported audio input: pass a File/Blob, ArrayBuffer, Uint8Array, AudioBuffer or a 16 kHz Float32Array.',
    );
  }
  if (out.length === 0) throw new AudioError('The audio contains no samples.');
  return out;
}
