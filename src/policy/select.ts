/**
 * Selection helpers shared by the policies: top-k (global and segment-wise), pooling,
 * spectral smoothing, sorted position sets. Everything returns sorted, unique Int32Arrays,
 * the form `HeadResidency` and `Move` require.
 */
import { WnwError } from '../errors.js';

/** Audio positions one head may keep on the GPU: ⌊budget · T⌋, the exact per-head share of r_GPU. */
export function headBudget(budget: number, audioLength: number): number {
  return Math.floor(budget * audioLength + 1e-9);
}

export function checkBudget(policy: string, budget: unknown): number {
  if (typeof budget !== 'number' || !(budget > 0 && budget <= 1)) {
    throw new WnwError('BAD_ARGUMENT', `policy "${policy}": budget must be a number in (0, 1], got ${String(budget)}`);
  }
  return budget;
}

/**
 * The error for an ablation or diagnosis given where only the method's options go (a
 * transcriber's policyOptions): run under the policy's name, it would not be the method.
 */
export function evaluationOnly(policy: string, key: string, methodOptions: readonly string[]): WnwError {
  return new WnwError(
    'BAD_ARGUMENT',
    `policy "${policy}": option "${key}" is an ablation or diagnosis, ` +
      `for evaluation only (npm run eval -- --policies ${policy}:${key}=VALUE); ` +
      `policyOptions take the method's options: ${methodOptions.join(', ')}`,
  );
}

/** Reads an optional numeric option with a default, rejecting non-numbers so typos fail loudly. */
export function numOpt(opts: Record<string, unknown>, key: string, dflt: number, min = -Infinity): number {
  const v = opts[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) {
    throw new WnwError('BAD_ARGUMENT', `option "${key}" must be a number >= ${min}, got ${String(v)}`);
  }
  return v;
}

export function range(start: number, end: number): Int32Array {
  const n = Math.max(0, end - start);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = start + i;
  return out;
}

export const NONE = new Int32Array(0);

/**
 * Indices of the k largest scores among `candidates` (default: all), returned sorted by
 * index. Ties go to the lower index so plans are deterministic across runs and backends.
 */
export function topK(scores: ArrayLike<number>, k: number, candidates?: ArrayLike<number>): Int32Array {
  const n = candidates ? candidates.length : scores.length;
  if (k <= 0 || n === 0) return NONE;
  const idx = new Int32Array(n);
  for (let i = 0; i < n; i++) idx[i] = candidates ? candidates[i] : i;
  if (k >= n) return idx.sort();
  const order = Array.from(idx).sort((a, b) => scores[b] - scores[a] || a - b);
  return Int32Array.from(order.slice(0, k)).sort();
}

/** Segment j covers audio offsets [j·n_s, min((j+1)·n_s, T)); the last one may be short. */
export function segmentCount(audioLength: number, segmentLength: number): number {
  return Math.ceil(audioLength / segmentLength);
}

/** Positions one segment of length `len` keeps at a retention: ⌊retention · len⌋ (the method's ⌊retention · n_s⌋). */
export function keepInSegment(retention: number, len: number): number {
  return Math.min(len, Math.floor(retention * len + 1e-9));
}

/**
 * WnW's segment-wise selection: top ⌊retention · len⌋ inside every segment, so no stretch
 * of audio is emptied. `global` is the ablation: one top-⌊retention · T⌋ over the whole audio.
 */
export function selectByRetention(
  scores: ArrayLike<number>,
  retention: number,
  segmentLength: number,
  mode: 'segment' | 'global' = 'segment',
): Int32Array {
  const T = scores.length;
  if (retention >= 1) return range(0, T);
  if (mode === 'global') return topK(scores, keepInSegment(retention, T));
  const parts: Int32Array[] = [];
  for (let start = 0; start < T; start += segmentLength) {
    const end = Math.min(T, start + segmentLength);
    parts.push(topK(scores, keepInSegment(retention, end - start), range(start, end)));
  }
  return concatSorted(parts);
}

/** Number of positions `selectByRetention` keeps, without scores (the λ search counts with it). */
export function retainedCount(
  audioLength: number,
  retention: number,
  segmentLength: number,
  mode: 'segment' | 'global' = 'segment',
): number {
  if (retention >= 1) return audioLength;
  if (mode === 'global') return keepInSegment(retention, audioLength);
  let n = 0;
  for (let start = 0; start < audioLength; start += segmentLength) {
    n += keepInSegment(retention, Math.min(audioLength, start + segmentLength) - start);
  }
  return n;
}

/** Concatenates sorted arrays whose ranges do not interleave (e.g. per-segment picks). */
export function concatSorted(parts: Int32Array[]): Int32Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Int32Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Sorted union of sorted unique arrays. */
export function union(a: Int32Array, b: Int32Array): Int32Array {
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && a[i] < b[j])) out.push(a[i++]);
    else if (i >= a.length || b[j] < a[i]) out.push(b[j++]);
    else {
      out.push(a[i++]);
      j++;
    }
  }
  return Int32Array.from(out);
}

/** Positions of [0, T) not in the sorted set `keep`. */
export function complement(keep: Int32Array, T: number): Int32Array {
  const out = new Int32Array(T - keep.length);
  let o = 0;
  let j = 0;
  for (let p = 0; p < T; p++) {
    if (j < keep.length && keep[j] === p) j++;
    else out[o++] = p;
  }
  return out;
}

/**
 * Same-length 1-D pooling with stride 1 and padding ⌊kernel/2⌋, like SnapKV's
 * F.avg_pool1d / F.max_pool1d (avg counts padding as zeros, as PyTorch's default does).
 */
export function pool1d(x: ArrayLike<number>, kernel: number, kind: 'avg' | 'max'): Float32Array {
  const n = x.length;
  const out = new Float32Array(n);
  if (kernel <= 1) {
    for (let i = 0; i < n; i++) out[i] = x[i];
    return out;
  }
  const half = Math.floor(kernel / 2);
  for (let i = 0; i < n; i++) {
    const lo = Math.max(0, i - half);
    const hi = Math.min(n - 1, i - half + kernel - 1);
    if (kind === 'max') {
      let m = -Infinity;
      for (let j = lo; j <= hi; j++) if (x[j] > m) m = x[j];
      out[i] = m;
    } else {
      let s = 0;
      for (let j = lo; j <= hi; j++) s += x[j];
      out[i] = s / kernel;
    }
  }
  return out;
}

/**
 * AudioKV's Spectral Score Smoothing: α · lowpass(s) + (1 − α) · s. The low-pass keeps the
 * DFT components whose period is at least `window` positions. The signal is mirrored
 * before the FFT so the periodic extension has no jump at the ends.
 */
export function spectralSmooth(s: ArrayLike<number>, alpha: number, window: number): Float32Array {
  const n = s.length;
  const out = new Float32Array(n);
  if (n === 0) return out;
  let size = 1;
  while (size < 2 * n) size *= 2;
  const re = new Float64Array(size);
  const im = new Float64Array(size);
  // Mirror to 2n, then pad by repeating the mirrored ends (keeps the extension smooth).
  for (let i = 0; i < size; i++) {
    const j = i < 2 * n ? (i < n ? i : 2 * n - 1 - i) : 0;
    re[i] = s[j];
  }
  fft(re, im, false);
  const cutoff = Math.floor(size / Math.max(1, window));
  for (let k = 0; k < size; k++) {
    const f = Math.min(k, size - k);
    if (f > cutoff) {
      re[k] = 0;
      im[k] = 0;
    }
  }
  fft(re, im, true);
  for (let i = 0; i < n; i++) out[i] = alpha * (re[i] / size) + (1 - alpha) * s[i];
  return out;
}

/** In-place iterative radix-2 FFT (unnormalised; the caller divides after the inverse). */
function fft(re: Float64Array, im: Float64Array, inverse: boolean): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j], re[i]];
      [im[i], im[j]] = [im[j], im[i]];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = ((inverse ? 2 : -2) * Math.PI) / len;
    const wr = Math.cos(ang);
    const wi = Math.sin(ang);
    for (let i = 0; i < n; i += len) {
      let cr = 1;
      let ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = i + k;
        const b = a + len / 2;
        const xr = re[b] * cr - im[b] * ci;
        const xi = re[b] * ci + im[b] * cr;
        re[b] = re[a] - xr;
        im[b] = im[a] - xi;
        re[a] += xr;
        im[a] += xi;
        const t = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = t;
      }
    }
  }
}
