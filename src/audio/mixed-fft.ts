/**
 * FFT of any length, for front-ends whose frame is not a power of two (Whisper's
 * n_fft = 400 = 2⁴·5²). A Stockham autosort FFT: each stage splits every sub-transform
 * of length n into r interleaved ones of length n/r (decimation in frequency), so no
 * bit reversal is needed and the output lands in natural order. Radices 4, 2, 3, 5
 * are taken first; any other prime factor runs as a direct DFT of that length, which is
 * still exact, only slower. Float64 throughout and allocated once, like ./fft.ts.
 */

interface Stage {
  /** Radix of this stage. */
  r: number;
  /** Length of each sub-transform entering the stage, and the number of them (stride). */
  n: number;
  s: number;
  /** Twiddles w_n^{p·k} for p < n/r, k < r, stored at [p·r + k]. */
  twRe: Float64Array;
  twIm: Float64Array;
}

function factorize(n: number): number[] {
  const out: number[] = [];
  let m = n;
  for (const r of [4, 2, 3, 5]) {
    while (m % r === 0) {
      out.push(r);
      m /= r;
    }
  }
  for (let p = 7; m > 1; p += 2) {
    while (m % p === 0) {
      out.push(p);
      m /= p;
    }
  }
  return out;
}

export class ComplexFft {
  readonly size: number;
  private readonly stages: Stage[] = [];
  private readonly bufRe: Float64Array;
  private readonly bufIm: Float64Array;
  /** Small-DFT matrices w_r^{j·k}, one per distinct radix other than 2 and 4. */
  private readonly dft = new Map<number, { re: Float64Array; im: Float64Array }>();
  private readonly aRe: Float64Array;
  private readonly aIm: Float64Array;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`FFT size must be a positive integer, got ${size}`);
    this.size = size;
    let n = size;
    let s = 1;
    for (const r of factorize(size)) {
      const m = n / r;
      const twRe = new Float64Array(m * r);
      const twIm = new Float64Array(m * r);
      for (let p = 0; p < m; p++) {
        for (let k = 0; k < r; k++) {
          const a = (-2 * Math.PI * p * k) / n;
          twRe[p * r + k] = Math.cos(a);
          twIm[p * r + k] = Math.sin(a);
        }
      }
      this.stages.push({ r, n, s, twRe, twIm });
      if (r !== 2 && r !== 4 && !this.dft.has(r)) {
        const re = new Float64Array(r * r);
        const im = new Float64Array(r * r);
        for (let j = 0; j < r; j++) {
          for (let k = 0; k < r; k++) {
            const a = (-2 * Math.PI * ((j * k) % r)) / r;
            re[j * r + k] = Math.cos(a);
            im[j * r + k] = Math.sin(a);
          }
        }
        this.dft.set(r, { re, im });
      }
      n = m;
      s *= r;
    }
    this.bufRe = new Float64Array(size);
    this.bufIm = new Float64Array(size);
    const maxR = Math.max(1, ...this.stages.map((st) => st.r));
    this.aRe = new Float64Array(maxR);
    this.aIm = new Float64Array(maxR);
  }

  /** In-place forward DFT, X[k] = Σ x[j]·e^{-2πijk/n}. */
  forward(re: Float64Array, im: Float64Array): void {
    let xr = re;
    let xi = im;
    let yr = this.bufRe;
    let yi = this.bufIm;
    for (const st of this.stages) {
      this.stage(st, xr, xi, yr, yi);
      [xr, yr] = [yr, xr];
      [xi, yi] = [yi, xi];
    }
    if (xr !== re) {
      re.set(xr);
      im.set(xi);
    }
  }

  /** y[q + s(r·p + k)] = w_n^{pk} Σ_j x[q + s(p + j·m)] w_r^{jk}, for q < s, p < m = n/r. */
  private stage(st: Stage, xr: Float64Array, xi: Float64Array, yr: Float64Array, yi: Float64Array): void {
    const { r, n, s, twRe, twIm } = st;
    const m = n / r;
    const sm = s * m;
    if (r === 2) {
      for (let p = 0; p < m; p++) {
        const w1r = twRe[p * 2 + 1];
        const w1i = twIm[p * 2 + 1];
        for (let q = 0; q < s; q++) {
          const i0 = q + s * p;
          const i1 = i0 + sm;
          const o = q + s * 2 * p;
          const ar = xr[i0],
            ai = xi[i0],
            br = xr[i1],
            bi = xi[i1];
          yr[o] = ar + br;
          yi[o] = ai + bi;
          const dr = ar - br,
            di = ai - bi;
          yr[o + s] = dr * w1r - di * w1i;
          yi[o + s] = dr * w1i + di * w1r;
        }
      }
      return;
    }
    if (r === 4) {
      for (let p = 0; p < m; p++) {
        const t = p * 4;
        const w1r = twRe[t + 1],
          w1i = twIm[t + 1];
        const w2r = twRe[t + 2],
          w2i = twIm[t + 2];
        const w3r = twRe[t + 3],
          w3i = twIm[t + 3];
        for (let q = 0; q < s; q++) {
          const i0 = q + s * p;
          const x0r = xr[i0],
            x0i = xi[i0];
          const x1r = xr[i0 + sm],
            x1i = xi[i0 + sm];
          const x2r = xr[i0 + 2 * sm],
            x2i = xi[i0 + 2 * sm];
          const x3r = xr[i0 + 3 * sm],
            x3i = xi[i0 + 3 * sm];
          const s02r = x0r + x2r,
            s02i = x0i + x2i;
          const d02r = x0r - x2r,
            d02i = x0i - x2i;
          const s13r = x1r + x3r,
            s13i = x1i + x3i;
          const d13r = x1r - x3r,
            d13i = x1i - x3i;
          // y1 = d02 - i·d13, y3 = d02 + i·d13 (forward transform, w_4 = -i).
          const y1r = d02r + d13i,
            y1i = d02i - d13r;
          const y2r = s02r - s13r,
            y2i = s02i - s13i;
          const y3r = d02r - d13i,
            y3i = d02i + d13r;
          const o = q + s * 4 * p;
          yr[o] = s02r + s13r;
          yi[o] = s02i + s13i;
          yr[o + s] = y1r * w1r - y1i * w1i;
          yi[o + s] = y1r * w1i + y1i * w1r;
          yr[o + 2 * s] = y2r * w2r - y2i * w2i;
          yi[o + 2 * s] = y2r * w2i + y2i * w2r;
          yr[o + 3 * s] = y3r * w3r - y3i * w3i;
          yi[o + 3 * s] = y3r * w3i + y3i * w3r;
        }
      }
      return;
    }
    // Other radices (3, 5, larger primes): a direct DFT of length r per butterfly.
    const { aRe, aIm } = this;
    const mat = this.dft.get(r)!;
    for (let p = 0; p < m; p++) {
      for (let q = 0; q < s; q++) {
        const i0 = q + s * p;
        for (let j = 0; j < r; j++) {
          aRe[j] = xr[i0 + j * sm];
          aIm[j] = xi[i0 + j * sm];
        }
        const o = q + s * r * p;
        for (let k = 0; k < r; k++) {
          let accR = 0;
          let accI = 0;
          for (let j = 0; j < r; j++) {
            const cr = mat.re[j * r + k],
              ci = mat.im[j * r + k];
            accR += aRe[j] * cr - aIm[j] * ci;
            accI += aRe[j] * ci + aIm[j] * cr;
          }
          const wr = twRe[p * r + k],
            wi = twIm[p * r + k];
          yr[o + s * k] = accR * wr - accI * wi;
          yi[o + s * k] = accR * wi + accI * wr;
        }
      }
    }
  }
}

/**
 * Power spectrum |X[k]|², k = 0..size/2, of a real frame of even length: the samples
 * packed pairwise as one complex sequence of half the length, then the split step that
 * separates the even and odd halves' spectra (as in ./fft.ts, for any even size).
 */
export class RealPowerFft {
  readonly size: number;
  private readonly half: number;
  private readonly fft: ComplexFft;
  private readonly re: Float64Array;
  private readonly im: Float64Array;
  private readonly cosS: Float64Array;
  private readonly sinS: Float64Array;

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 2 || size % 2 !== 0)
      throw new RangeError(`real FFT size must be even, got ${size}`);
    this.size = size;
    const h = size / 2;
    this.half = h;
    this.fft = new ComplexFft(h);
    this.re = new Float64Array(h);
    this.im = new Float64Array(h);
    this.cosS = new Float64Array(h + 1);
    this.sinS = new Float64Array(h + 1);
    for (let k = 0; k <= h; k++) {
      this.cosS[k] = Math.cos((2 * Math.PI * k) / size);
      this.sinS[k] = Math.sin((2 * Math.PI * k) / size);
    }
  }

  /** Writes |X[k]|² for k = 0..size/2 of `input` (length `size`, not modified) to `out`. */
  power(input: Float64Array, out: Float64Array): void {
    const h = this.half;
    const { re, im } = this;
    for (let i = 0; i < h; i++) {
      re[i] = input[2 * i];
      im[i] = input[2 * i + 1];
    }
    this.fft.forward(re, im);
    for (let k = 0; k <= h; k++) {
      const k1 = k === h ? 0 : k;
      const k2 = k === 0 ? 0 : h - k;
      const zr = re[k1],
        zi = im[k1];
      const cr = re[k2],
        ci = -im[k2];
      const er = 0.5 * (zr + cr),
        ei = 0.5 * (zi + ci);
      const or = 0.5 * (zi - ci),
        oi = -0.5 * (zr - cr);
      const wr = this.cosS[k],
        wi = -this.sinS[k];
      const xr = er + or * wr - oi * wi;
      const xi = ei + or * wi + oi * wr;
      out[k] = xr * xr + xi * xi;
    }
  }
}
