import { AudioError } from '../errors.js';

/**
 * Averages channels into one; non-finite samples (from corrupt float files) become 0 so
 * one NaN cannot poison the whole mel spectrogram.
 */
export function downmix(channels: Float32Array[]): Float32Array {
  if (channels.length === 0) throw new AudioError('The audio has no channels.');
  const n = channels[0].length;
  const out = channels.length === 1 ? new Float32Array(channels[0]) : new Float32Array(n);
  if (channels.length > 1) {
    const inv = 1 / channels.length;
    for (const ch of channels) {
      if (ch.length !== n) throw new AudioError('The audio channels differ in length.');
      for (let i = 0; i < n; i++) out[i] += ch[i] * inv;
    }
  }
  for (let i = 0; i < n; i++) if (!Number.isFinite(out[i])) out[i] = 0;
  return out;
}
