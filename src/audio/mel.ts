/**
 * Log-mel features, the same numbers as training/common.py `log_mel` followed by the
 * global normalisation: center=True reflect padding, periodic Hann(winLength)
 * zero-padded to nFft, power spectrum, HTK triangular filters without area
 * normalisation, ln(mel + melFloor), then (x - melMean) / melStd.
 * Work is float64 like numpy; output is float32 [nMels, T] (mel-major, the ONNX layout).
 */
import { RealFft } from './fft.js';

/** The audio front end's parameters (config.json's `audio`): the log-mel and what an audio token spans. */
export interface AudioConfig {
  sampleRate: number; // input rate the front-end expects (Hz)
  nFft: number; // FFT size (power of two); the window is zero-padded to it
  winLength: number; // Hann window length in samples (periodic Hann)
  hopLength: number; // samples between frames
  nMels: number;
  fMin: number;
  fMax: number;
  /** Global normalisation of ln(mel + melFloor): (x - melMean) / melStd. */
  melFloor: number;
  melMean: number;
  melStd: number;
  /** Mel frames per audio token (encoder down-sampling). */
  framesPerToken: number;
  /** Audio tokens per second of audio = sampleRate / hopLength / framesPerToken. */
  tokensPerSecond: number;
  /** The encoder attends within windows of this many mel frames (multiple of framesPerToken). */
  encoderWindowFrames: number;
}

/** The part of the model's AudioConfig the front-end needs. */
export type MelParams = Pick<
  AudioConfig,
  'sampleRate' | 'nFft' | 'winLength' | 'hopLength' | 'nMels' | 'fMin' | 'fMax' | 'melFloor' | 'melMean' | 'melStd'
>;

export const hzToMel = (f: number): number => 2595 * Math.log10(1 + f / 700);
export const melToHz = (m: number): number => 700 * (10 ** (m / 2595) - 1);

/** Number of frames for `numSamples` samples: floor(numSamples / hop). */
export function frameCount(numSamples: number, hopLength: number): number {
  return Math.floor(numSamples / hopLength);
}

/**
 * Dense [nMels, nFft/2+1] filterbank, float64. Points are spaced like numpy.linspace
 * (start + i·step, last point exactly the end) so the edges agree with the Python side.
 */
export function melFilterbank(p: Pick<MelParams, 'sampleRate' | 'nFft' | 'nMels' | 'fMin' | 'fMax'>): Float64Array {
  const bins = (p.nFft >> 1) + 1;
  const lo = hzToMel(p.fMin);
  const hi = hzToMel(p.fMax);
  const n = p.nMels + 2;
  const step = (hi - lo) / (n - 1);
  const pts = new Float64Array(n);
  for (let i = 0; i < n; i++) pts[i] = melToHz(i === n - 1 ? hi : lo + i * step);
  const fb = new Float64Array(p.nMels * bins);
  for (let m = 0; m < p.nMels; m++) {
    const a = pts[m];
    const c = pts[m + 1];
    const b = pts[m + 2];
    for (let k = 0; k < bins; k++) {
      const f = (k * p.sampleRate) / p.nFft;
      const v = Math.min((f - a) / (c - a), (b - f) / (b - c));
      fb[m * bins + k] = v > 0 ? v : 0;
    }
  }
  return fb;
}

/** Index into a signal of length n extended by reflection without edge repeat (numpy "reflect"). */
export function reflect(i: number, n: number): number {
  if (n === 1) return 0;
  const period = 2 * (n - 1);
  let j = i % period;
  if (j < 0) j += period;
  return j < n ? j : period - j;
}

/** A dense [nMels, bins] filter bank kept as each filter's nonzero run of bins (filters span a few bins each). */
export interface SparseFilters {
  /** First bin of filter m. */
  start: Int32Array;
  /** Filter m's weights are w[off[m] .. off[m + 1]). */
  off: Int32Array;
  w: Float64Array;
}

export function sparseFilters(dense: Float64Array, nMels: number, bins: number): SparseFilters {
  const start = new Int32Array(nMels);
  const off = new Int32Array(nMels + 1);
  const w: number[] = [];
  for (let m = 0; m < nMels; m++) {
    let first = -1;
    let last = -1;
    for (let k = 0; k < bins; k++) {
      if (dense[m * bins + k] !== 0) {
        if (first < 0) first = k;
        last = k;
      }
    }
    start[m] = Math.max(first, 0);
    off[m] = w.length;
    for (let k = first; first >= 0 && k <= last; k++) w.push(dense[m * bins + k]);
  }
  off[nMels] = w.length;
  return { start, off, w: Float64Array.from(w) };
}

/** Filter m's energy: its weights times the power spectrum over its run of bins. */
export function filterEnergy(f: SparseFilters, m: number, pow: Float64Array): number {
  let acc = 0;
  const k0 = f.start[m] - f.off[m];
  for (let j = f.off[m]; j < f.off[m + 1]; j++) acc += f.w[j] * pow[k0 + j];
  return acc;
}

/** Periodic Hann window of `length` (np.hanning(length + 1)[:-1], torch.hann_window(length)). */
export function periodicHann(length: number): Float64Array {
  const w = new Float64Array(length);
  for (let i = 0; i < length; i++) w[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / length);
  return w;
}

export class LogMel {
  readonly params: MelParams;
  readonly bins: number;
  private readonly fft: RealFft;
  private readonly window: Float64Array;
  private readonly filters: SparseFilters;
  private readonly frame: Float64Array;
  private readonly pow: Float64Array;

  constructor(params: MelParams) {
    const p = params;
    if ((p.nFft & (p.nFft - 1)) !== 0) throw new RangeError(`nFft must be a power of two, got ${p.nFft}`);
    if (p.winLength > p.nFft) throw new RangeError('winLength must not exceed nFft');
    if (!(p.fMax > p.fMin) || p.fMax > p.sampleRate / 2 + 1e-9)
      throw new RangeError(`bad mel range ${p.fMin}..${p.fMax} Hz`);
    this.params = { ...p };
    this.bins = (p.nFft >> 1) + 1;
    this.fft = new RealFft(p.nFft);
    this.window = periodicHann(p.winLength);
    this.filters = sparseFilters(melFilterbank(p), p.nMels, this.bins);
    this.frame = new Float64Array(p.nFft);
    this.pow = new Float64Array(this.bins);
  }

  frames(numSamples: number): number {
    return frameCount(numSamples, this.params.hopLength);
  }

  /**
   * Features of frames [start, end) of `samples` (16 kHz mono), as [nMels, end - start].
   * Frames are independent, so a caller may compute a long recording in slices.
   * `normalize: false` returns ln(mel + melFloor) as training/common.py's log_mel does.
   */
  compute(
    samples: Float32Array,
    opts: { start?: number; end?: number; normalize?: boolean; out?: Float32Array } = {},
  ): Float32Array {
    const p = this.params;
    const n = samples.length;
    const total = this.frames(n);
    const start = opts.start ?? 0;
    const end = opts.end ?? total;
    if (!(0 <= start && start <= end && end <= total))
      throw new RangeError(`frame range [${start}, ${end}) outside [0, ${total})`);
    const T = end - start;
    const out = opts.out ?? new Float32Array(p.nMels * T);
    if (out.length < p.nMels * T) throw new RangeError('output buffer too small');
    const normalize = opts.normalize ?? true;
    const mean = normalize ? p.melMean : 0;
    const inv = normalize ? 1 / p.melStd : 1;
    const { frame, pow, window, filters } = this;
    const win = p.winLength;
    const pad = win >> 1;
    for (let t = start; t < end; t++) {
      const s0 = t * p.hopLength - pad;
      if (s0 >= 0 && s0 + win <= n) {
        for (let i = 0; i < win; i++) frame[i] = samples[s0 + i] * window[i];
      } else {
        for (let i = 0; i < win; i++) frame[i] = samples[reflect(s0 + i, n)] * window[i];
      }
      // frame[win..nFft) stays zero: the right zero-padding is never written.
      this.fft.power(frame, pow);
      const col = t - start;
      for (let m = 0; m < p.nMels; m++)
        out[m * T + col] = (Math.log(filterEnergy(filters, m, pow) + p.melFloor) - mean) * inv;
    }
    return out;
  }
}

/** One-shot helper: [nMels, T] normalised log-mel of 16 kHz mono samples. */
export function logMel(samples: Float32Array, params: MelParams): { data: Float32Array; frames: number } {
  const lm = new LogMel(params);
  return { data: lm.compute(samples), frames: lm.frames(samples.length) };
}
