/**
 * Radix-2 real FFT of a fixed size, power spectrum only. An n-point real FFT is one
 * n/2-point complex FFT of the even/odd samples packed as re/im, then a split step:
 * half the work of a complex FFT. Everything is float64 (the training code uses
 * numpy's float64 rfft) and allocated once per instance, so the per-frame path does
 * not allocate.
 */
export class RealFft {
  readonly size: number;
  private readonly half: number;
  private readonly rev: Uint32Array;
  /** Twiddles of the half-size complex FFT: cos/sin(2πk/half), k < half/2. */
  private readonly cosH: Float64Array;
  private readonly sinH: Float64Array;
  /** Twiddles of the split step: cos/sin(2πk/size), k <= half. */
  private readonly cosS: Float64Array;
  private readonly sinS: Float64Array;
  private readonly re: Float64Array;
  private readonly im: Float64Array;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 4 || (size & (size - 1)) !== 0) {
      throw new RangeError(`FFT size must be a power of two >= 4, got ${size}`);
    }
    this.size = size;
    const h = size >> 1;
    this.half = h;
    let bits = 0;
    while (1 << bits < h) bits++;
    this.rev = new Uint32Array(h);
    for (let i = 0; i < h; i++) {
      let r = 0;
      for (let b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
      this.rev[i] = r;
    }
    this.cosH = new Float64Array(Math.max(1, h >> 1));
    this.sinH = new Float64Array(Math.max(1, h >> 1));
    for (let k = 0; k < h >> 1; k++) {
      this.cosH[k] = Math.cos((2 * Math.PI * k) / h);
      this.sinH[k] = Math.sin((2 * Math.PI * k) / h);
    }
    this.cosS = new Float64Array(h + 1);
    this.sinS = new Float64Array(h + 1);
    for (let k = 0; k <= h; k++) {
      this.cosS[k] = Math.cos((2 * Math.PI * k) / size);
      this.sinS[k] = Math.sin((2 * Math.PI * k) / size);
    }
    this.re = new Float64Array(h);
    this.im = new Float64Array(h);
  }

  /**
   * |X[k]|² for k = 0..size/2 of the real input (length `size`; read, not modified),
   * written to `out` (length >= size/2 + 1).
   */
  power(input: Float64Array, out: Float64Array): void {
    const h = this.half;
    const re = this.re;
    const im = this.im;
    const rev = this.rev;
    for (let i = 0; i < h; i++) {
      const j = rev[i];
      re[j] = input[2 * i];
      im[j] = input[2 * i + 1];
    }
    // Iterative decimation-in-time butterflies; twiddle index stride halves each stage.
    const cosH = this.cosH;
    const sinH = this.sinH;
    for (let len = 2; len <= h; len <<= 1) {
      const halfLen = len >> 1;
      const stride = h / len;
      for (let start = 0; start < h; start += len) {
        for (let k = 0; k < halfLen; k++) {
          const wr = cosH[k * stride];
          const wi = -sinH[k * stride];
          const a = start + k;
          const b = a + halfLen;
          const xr = re[b] * wr - im[b] * wi;
          const xi = re[b] * wi + im[b] * wr;
          re[b] = re[a] - xr;
          im[b] = im[a] - xi;
          re[a] += xr;
          im[a] += xi;
        }
      }
    }
    // Split: X[k] = E[k] + e^{-2πik/n} O[k], with E, O recovered from Z[k] and conj(Z[h-k]).
    const cosS = this.cosS;
    const sinS = this.sinS;
    for (let k = 0; k <= h; k++) {
      const k1 = k === h ? 0 : k;
      const k2 = k === 0 ? 0 : h - k;
      const zr = re[k1];
      const zi = im[k1];
      const cr = re[k2];
      const ci = -im[k2];
      const er = 0.5 * (zr + cr);
      const ei = 0.5 * (zi + ci);
      // O[k] = (Z[k] - conj(Z[h-k])) / (2i)
      const dr = zr - cr;
      const di = zi - ci;
      const or = 0.5 * di;
      const oi = -0.5 * dr;
      const wr = cosS[k];
      const wi = -sinS[k];
      const xr = er + or * wr - oi * wi;
      const xi = ei + or * wi + oi * wr;
      out[k] = xr * xr + xi * xi;
    }
  }
}
