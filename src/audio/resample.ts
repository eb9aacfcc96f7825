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

/** The polyphase filter for one rate pair; shared by `resample` and `StreamResampler`. */
interface Polyphase {
  L: number;
  M: number;
  P: number;
  K: number;
  taps: number;
  table: Float32Array;
}

function checkRates(from: number, to: number): void {
  if (!(Number.isInteger(from) && Number.isInteger(to) && from > 0 && to > 0)) {
    throw new RangeError(`sample rates must be positive integers, got ${from} -> ${to}`);
  }
}

function polyphase(from: number, to: number, opts: ResampleOptions): Polyphase {
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
  return { L, M, P, K, taps, table };
}

/** The first input sample output `o` weighs, and the offset of its phase in the table. */
function firstTap(f: Polyphase, o: number): [first: number, base: number] {
  // Exact integer time o·M/L = i0 + r/L.
  const pos = o * f.M;
  let i0 = Math.floor(pos / f.L);
  const r = pos - i0 * f.L;
  let p = f.P === f.L ? r : Math.round((r * f.P) / f.L);
  if (p === f.P) {
    p = 0;
    i0 += 1;
  }
  return [i0 - f.K, p * f.taps];
}

/**
 * Output sample `o`. `x[i]` holds input sample `x0 + i`; inputs before 0 and from `n` on
 * count as zero, and every other input the filter reaches must be in `x`.
 */
function outputAt(f: Polyphase, o: number, x: Float32Array, x0: number, n: number): number {
  const [first, base] = firstTap(f, o);
  const j0 = Math.max(0, -first);
  const j1 = Math.min(f.taps, n - first);
  const off = first - x0;
  let acc = 0;
  for (let j = j0; j < j1; j++) acc += f.table[base + j] * x[off + j];
  return acc;
}

/** Resamples `x` from `from` Hz to `to` Hz (integers). Returns `x` itself when the rates match. */
export function resample(x: Float32Array, from: number, to: number, opts: ResampleOptions = {}): Float32Array {
  checkRates(from, to);
  if (from === to) return x;
  const f = polyphase(from, to, opts);
  const n = x.length;
  const y = new Float32Array(resampledLength(n, from, to));
  for (let o = 0; o < y.length; o++) y[o] = outputAt(f, o, x, 0, n);
  return y;
}

/**
 * `resample` in blocks, for audio decoded a block at a time: the outputs of all pushes and
 * `end()` together equal `resample` of the whole input, sample for sample, while only the
 * filter's reach of input (a few hundred samples) is held between blocks.
 */
export class StreamResampler {
  private readonly f: Polyphase | undefined;
  private buf = new Float32Array(0);
  /** Input index of buf[0]; `held` samples of buf are valid. */
  private start = 0;
  private held = 0;
  private received = 0;
  private next = 0;

  constructor(
    private readonly from: number,
    private readonly to: number,
    opts: ResampleOptions = {},
  ) {
    checkRates(from, to);
    this.f = from === to ? undefined : polyphase(from, to, opts);
  }

  /** The outputs that `x` completes (the block itself when the rates match). */
  push(x: Float32Array): Float32Array {
    this.received += x.length;
    const f = this.f;
    if (!f) return x;
    // Drop what no later output reaches, then append.
    const keepFrom = Math.max(this.start, Math.min(firstTap(f, this.next)[0], this.start + this.held));
    const drop = keepFrom - this.start;
    if (drop > 0) {
      this.buf.copyWithin(0, drop, this.held);
      this.held -= drop;
      this.start = keepFrom;
    }
    if (this.held + x.length > this.buf.length) {
      const grown = new Float32Array(Math.max(this.held + x.length, 2 * this.buf.length));
      grown.set(this.buf.subarray(0, this.held));
      this.buf = grown;
    }
    this.buf.set(x, this.held);
    this.held += x.length;
    // Outputs whose every tap has arrived.
    const bound = Math.max(0, Math.floor((this.received * this.to) / this.from) + 1 - this.next);
    const y = new Float32Array(bound);
    let k = 0;
    while (k < bound && firstTap(f, this.next)[0] + f.taps <= this.received) {
      y[k++] = outputAt(f, this.next++, this.buf, this.start, this.received);
    }
    return y.subarray(0, k);
  }

  /** The remaining outputs, the input past its end counting as zero. */
  end(): Float32Array {
    const f = this.f;
    if (!f) return new Float32Array(0);
    const y = new Float32Array(Math.max(0, resampledLength(this.received, this.from, this.to) - this.next));
    for (let k = 0; k < y.length; k++) y[k] = outputAt(f, this.next++, this.buf, this.start, this.received);
    return y;
  }
}
