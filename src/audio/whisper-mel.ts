/**
 * The Whisper log-mel front-end shared by Voxtral, Qwen2-Audio and Qwen2.5-Omni, with the
 * numbers of transformers' `WhisperFeatureExtractor` (`audio_utils.spectrogram` with
 * `mel_filter_bank`): periodic Hann of n_fft = 400 samples, hop 160, centred frames with
 * reflect padding of n_fft/2 at both ends of the (zero-padded) input, power spectrum,
 * Slaney-scale triangular filters 0–8 kHz with Slaney area normalisation, log10 of
 * max(mel, 1e-10), the last frame dropped, then max(x, max − 8) and (x + 4) / 4.
 *
 * Where the max is taken. Upstream takes it over one processor call's example: the whole
 * zero-padded waveform handed to the feature extractor (numpy: `log_spec.max()` per
 * waveform; torch: the max per batch item). What an "example" is differs by family, and
 * this function follows each Python processor rather than transformers.js's per-30 s
 * chunking:
 * - Voxtral (`VoxtralProcessor._retrieve_input_features`): the whole recording, zero-padded
 *   to a multiple of 30 s, is one example; the mel is then cut into 3000-frame chunks.
 *   So one max over the whole padded file: call once with `padToMultipleOf: 480000`.
 * - Qwen2-Audio (`Qwen2AudioProcessor`): each audio clip is truncated to 30 s and padded to
 *   30 s (`padding="max_length"`, truncation on), one max per clip: call once per ≤ 30 s clip
 *   with `truncateTo: 480000, padToLength: 480000`.
 * - Qwen2.5-Omni (`Qwen2_5OmniProcessor`): `padding="max_length"` to the extractor's
 *   n_samples, one max per audio; we never truncate (the upstream default cuts at the
 *   preprocessor's chunk_length): call once per recording with `padToLength: n_samples`.
 * The padding is zeros after the audio, as `SequenceFeatureExtractor.pad` does, so frames
 * near the end see zeros rather than a reflection of the audio, as they do upstream.
 *
 * Work is float64 (numpy's); the output is float32, mel-major [nMels, frames] like the
 * upstream `input_features`.
 */
import { filterEnergy, periodicHann, reflect, sparseFilters, type SparseFilters } from './mel.js';
import { RealPowerFft } from './mixed-fft.js';

export interface WhisperMelParams {
  sampleRate: number;
  nFft: number;
  hopLength: number;
  nMels: number;
  fMin: number;
  fMax: number;
}

/** The values every one of the three families uses (num_mel_bins may differ per config). */
export const WHISPER_MEL: WhisperMelParams = {
  sampleRate: 16000,
  nFft: 400,
  hopLength: 160,
  nMels: 128,
  fMin: 0,
  fMax: 8000,
};

export interface WhisperPadding {
  /** Keep at most this many samples (Qwen2-Audio: 480000, one 30 s window per clip). */
  truncateTo?: number;
  /** Zero-pad at the end to at least this many samples (Qwen: the extractor's n_samples). */
  padToLength?: number;
  /** Then zero-pad at the end to a multiple of this many samples (Voxtral: 480000). */
  padToMultipleOf?: number;
}

export interface WhisperMel {
  /** [nMels, frames], mel-major. */
  data: Float32Array;
  nMels: number;
  frames: number;
  /**
   * Frames that hold audio rather than padding: the upstream feature attention mask's sum,
   * ceil(kept samples / hop), at most `frames`.
   */
  validFrames: number;
  /** Samples after truncation and padding. */
  paddedSamples: number;
}

const hzToMelSlaney = (f: number): number =>
  f < 1000 ? (3 * f) / 200 : 15 + Math.log(f / 1000) * (27 / Math.log(6.4));
const melToHzSlaney = (m: number): number =>
  m < 15 ? (200 * m) / 3 : 1000 * Math.exp((Math.log(6.4) / 27) * (m - 15));

/**
 * Slaney filters as `mel_filter_bank(norm="slaney", mel_scale="slaney")`, dense
 * [nMels, nFft/2+1], float64. Bin k sits at linspace(0, sampleRate // 2, bins)[k] and the
 * band edges at linspace(mel(fMin), mel(fMax), nMels + 2), as numpy spaces them.
 */
export function slaneyFilterbank(
  p: Pick<WhisperMelParams, 'sampleRate' | 'nFft' | 'nMels' | 'fMin' | 'fMax'>,
): Float64Array {
  const bins = Math.floor(p.nFft / 2) + 1;
  const lo = hzToMelSlaney(p.fMin);
  const hi = hzToMelSlaney(p.fMax);
  const n = p.nMels + 2;
  const hz = new Float64Array(n);
  for (let i = 0; i < n; i++) hz[i] = melToHzSlaney(linspace(lo, hi, n, i));
  const nyq = Math.floor(p.sampleRate / 2);
  const fb = new Float64Array(p.nMels * bins);
  for (let m = 0; m < p.nMels; m++) {
    const enorm = 2 / (hz[m + 2] - hz[m]);
    for (let k = 0; k < bins; k++) {
      const f = linspace(0, nyq, bins, k);
      const down = -(hz[m] - f) / (hz[m + 1] - hz[m]);
      const up = (hz[m + 2] - f) / (hz[m + 2] - hz[m + 1]);
      const v = Math.min(down, up);
      fb[m * bins + k] = v > 0 ? v * enorm : 0;
    }
  }
  return fb;
}

/** numpy.linspace(a, b, n)[i]: a + i·step, the last point exactly b. */
function linspace(a: number, b: number, n: number, i: number): number {
  if (i === n - 1) return b;
  return a + i * ((b - a) / (n - 1));
}

/** Samples kept and the padded length for `n` input samples. */
export function whisperPaddedLength(n: number, pad: WhisperPadding = {}): { kept: number; padded: number } {
  const kept = pad.truncateTo !== undefined ? Math.min(n, pad.truncateTo) : n;
  let padded = Math.max(kept, pad.padToLength ?? 0);
  const mult = pad.padToMultipleOf;
  if (mult) padded = Math.ceil(padded / mult) * mult;
  return { kept, padded };
}

export class WhisperLogMel {
  readonly params: WhisperMelParams;
  readonly bins: number;
  private readonly fft: RealPowerFft;
  private readonly window: Float64Array;
  private readonly filters: SparseFilters;
  private readonly frame: Float64Array;
  private readonly pow: Float64Array;

  constructor(params: WhisperMelParams = WHISPER_MEL) {
    const p = params;
    if (!(Number.isInteger(p.nFft) && p.nFft >= 4 && p.nFft % 2 === 0))
      throw new RangeError(`nFft must be an even integer >= 4, got ${p.nFft}`);
    if (!(Number.isInteger(p.hopLength) && p.hopLength > 0))
      throw new RangeError(`hopLength must be a positive integer, got ${p.hopLength}`);
    if (!(Number.isInteger(p.nMels) && p.nMels > 0))
      throw new RangeError(`nMels must be a positive integer, got ${p.nMels}`);
    if (!(p.fMax > p.fMin && p.fMin >= 0) || p.fMax > p.sampleRate / 2)
      throw new RangeError(`bad mel range ${p.fMin}..${p.fMax} Hz`);
    this.params = { ...p };
    this.bins = p.nFft / 2 + 1;
    this.fft = new RealPowerFft(p.nFft);
    this.window = periodicHann(p.nFft);
    this.filters = sparseFilters(slaneyFilterbank(p), p.nMels, this.bins);
    this.frame = new Float64Array(p.nFft);
    this.pow = new Float64Array(this.bins);
  }

  /**
   * Features of one processor example: `samples` (mono, at params.sampleRate) truncated and
   * zero-padded per `pad`, one max over everything returned.
   */
  compute(samples: Float32Array, pad: WhisperPadding = {}): WhisperMel {
    const p = this.params;
    const { kept, padded } = whisperPaddedLength(samples.length, pad);
    if (padded < 2) throw new RangeError(`need at least 2 samples after padding, got ${padded}`);
    const frames = Math.floor(padded / p.hopLength); // 1 + floor(padded / hop), last dropped
    const nMels = p.nMels;
    const out = new Float32Array(nMels * frames);
    const { frame, pow, window, filters } = this;
    const nFft = p.nFft;
    const half = nFft >> 1;
    let max = -Infinity;
    for (let t = 0; t < frames; t++) {
      const s0 = t * p.hopLength - half;
      if (s0 >= 0 && s0 + nFft <= kept) {
        for (let i = 0; i < nFft; i++) frame[i] = samples[s0 + i] * window[i];
      } else {
        // Reflection is about the padded signal's ends; past `kept` the signal is zeros.
        for (let i = 0; i < nFft; i++) {
          const j = reflect(s0 + i, padded);
          frame[i] = j < kept ? samples[j] * window[i] : 0;
        }
      }
      this.fft.power(frame, pow);
      for (let m = 0; m < nMels; m++) {
        const acc = filterEnergy(filters, m, pow);
        const v = Math.log10(acc > 1e-10 ? acc : 1e-10);
        if (v > max) max = v;
        out[m * frames + t] = v;
      }
    }
    const floor = max - 8;
    for (let i = 0; i < out.length; i++) {
      const v = out[i];
      out[i] = ((v > floor ? v : floor) + 4) / 4;
    }
    const validFrames = Math.min(frames, Math.ceil(kept / p.hopLength));
    return { data: out, nMels, frames, validFrames, paddedSamples: padded };
  }
}

/** One-shot helper: the Whisper features of `samples` with `pad`. */
export function whisperLogMel(
  samples: Float32Array,
  pad: WhisperPadding = {},
  params: WhisperMelParams = WHISPER_MEL,
): WhisperMel {
  return new WhisperLogMel(params).compute(samples, pad);
}
