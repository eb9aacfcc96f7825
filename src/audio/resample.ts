/**
 * Band-limited resampling by a Kaiser-windowed sinc, polyphase. For a rate ratio L/M in
 * lowest terms the filter is tabulated at the L exact fractional offsets, so the common
 * rates (44.1k, 48k, 22.05k, 8k -> 16k) are exact; when L is larger than MAX_PHASES the
 * offset is rounded to one of MAX_PHASES phases (timing error < 1/(2·MAX_PHASES) of a
 * sample, below -70 dB for in-band tones).
 * Cutoff is ROLLOFF × the lower Nyquist, with about 80 dB stop-band attenuation: a tone
 * that would alias into 0..7.5 kHz at 16 kHz output is suppressed, the 0..~7 kHz band
 * passes flat. Samples outside the signal count as zero.
 */
export interface ResampleOptions {
  /** Cutoff as a fraction of the lower Nyquist frequency. */
  rolloff?: number;
  /** Zero crossings of the sinc on each side (filter length). */
  zeroCrossings?: number;
  /** Kaiser beta (8 ≈ 80 dB stop band). */
  beta?: number;
}

const MAX_PHASES = 4096;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Zeroth-order modified Bessel function of the first kind (series; converges fast for beta ≤ 20). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 60; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

/** Output length for `n` input samples: round(n · to / from), like training/common.py. */
export function resampledLength(n: number, from: number, to: number): number {
  return Math.round((n * to) / from);
}

/** Resamples `x` from `from` Hz to `to` Hz (integers). Returns `x` itself when the rates match. */
export function resample(x: Float32Array, from: number, to: number, opts: ResampleOptions = {}): Float32Array {
  if (!(Number.isInteger(from) && Number.isInteger(to) && from > 0 && to > 0)) {
    throw new RangeError(`sample rates must be positive integers, got ${from} -> ${to}`);
  }
  if (from === to) return x;
  const g = gcd(from, to);
  const L = to / g; // output steps per M input samples
  const M = from / g;
  const rolloff = opts.rolloff ?? 0.94;
  const zc = opts.zeroCrossings ?? 32;
  const beta = opts.beta ?? 8;
  // Cutoff in cycles per input sample; the sinc's zero crossings are 1/(2·fc) input samples apart.
  const fc = (0.5 * rolloff * Math.min(from, to)) / from;
  const halfWidth = zc / (2 * fc);
  const P = Math.min(L, MAX_PHASES);
  // Tap j of phase p weighs input sample (i0 - K + j) for an output at time i0 + p/P;
  // 2K + 2 taps cover |t| < halfWidth for every fractional offset.
  const K = Math.ceil(halfWidth);
  const taps = 2 * K + 2;
  const table = new Float32Array((P + 1) * taps);
  const i0beta = besselI0(beta);
  for (let p = 0; p <= P; p++) {
    const frac = p / P;
    let sum = 0;
    for (let j = 0; j < taps; j++) {
      const t = j - K - frac; // input-sample offset from the output time
      let h = 0;
      if (Math.abs(t) < halfWidth) {
        const r = t / halfWidth;
        const win = besselI0(beta * Math.sqrt(1 - r * r)) / i0beta;
        const arg = 2 * fc * t;
        const sinc = arg === 0 ? 1 : Math.sin(Math.PI * arg) / (Math.PI * arg);
        h = 2 * fc * sinc * win;
      }
      table[p * taps + j] = h;
      sum += h;
    }
    // Unit DC gain in every phase: no ripple at the phase rate on steady signals.
    for (let j = 0; j < taps; j++) table[p * taps + j] /= sum;
  }
  const n = x.length;
  const nOut = resampledLength(n, from, to);
  const y = new Float32Array(nOut);
  for (let o = 0; o < nOut; o++) {
    // Exact integer time o·M/L = i0 + r/L.
    const pos = o * M;
    let i0 = Math.floor(pos / L);
    const r = pos - i0 * L;
    let p = P === L ? r : Math.round((r * P) / L);
    if (p === P) {
      p = 0;
      i0 += 1;
    }
    const first = i0 - K;
    const base = p * taps;
    let acc = 0;
    if (first >= 0 && first + taps <= n) {
      for (let j = 0; j < taps; j++) acc += table[base + j] * x[first + j];
    } else {
      const j0 = Math.max(0, -first);
      const j1 = Math.min(taps, n - first);
      for (let j = j0; j < j1; j++) acc += table[base + j] * x[first + j];
    }
    y[o] = acc;
  }
  return y;
}
