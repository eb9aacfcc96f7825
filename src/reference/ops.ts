/**
 * Plain-TypeScript decoder kernels. They are the CPU backend's arithmetic and the
 * numerical reference every WGSL kernel is tested against, so they favour clarity
 * and f32 storage with higher-precision (JS number) accumulation.
 *
 * Layouts (row-major): a weight W is [rows, cols] (PyTorch Linear: [out, in]);
 * activations X are [n, dim]. A KV pool stores pages of `pageSize` slots; slot s of
 * page p holds key K[(p*pageSize+s)*headDim ..] and its sequence position in
 * positions[p*pageSize+s] (EMPTY_SLOT when unused, −(count + 1) for a summary slot:
 * kv/summary.ts).
 */
import { slotBias } from '../kv/summary.js';
import { dequantizeTile, tileRows, type Matrix } from './matrix.js';
import { Q4_GROUP, rowWords } from '../model/quant.js';
import { f16Table } from '../model/f16.js';

export const EMPTY_SLOT = -1;

/**
 * out[r] = sum_c W[r, c] * x[c]. Four rows at a time: one read of x serves four dot products.
 * A packed W runs the same loop over one dequantised tile of rows after another.
 */
export function matvec(w: Matrix, rows: number, cols: number, x: Float32Array, out: Float32Array, xOffset = 0): void {
  if (w instanceof Float32Array) {
    matvecF32(w, rows, cols, x, out, xOffset);
    return;
  }
  checkPacked(w, rows, cols);
  if (w.format === 'q4') {
    matvecQ4(w, rows, cols, x, out, xOffset);
    return;
  }
  const T = tileRows(cols);
  for (let r0 = 0; r0 < rows; r0 += T) {
    const n = Math.min(T, rows - r0);
    matvecF32(dequantizeTile(w, r0, n), n, cols, x, out.subarray(r0, r0 + n), xOffset);
  }
}

/**
 * matvec of a q4 matrix with each weight dequantised where it is used: (code - 8) * scale is
 * exact in f32 (a 4-bit integer times an f16), so it is the very value `dequantize` stores,
 * and the sums run over K in the same order as matvecF32's: the same results, bit for bit,
 * without writing and reading back a tile (a decode step's products read each weight once).
 */
function matvecQ4(
  m: Exclude<Matrix, Float32Array>,
  rows: number,
  cols: number,
  x: Float32Array,
  out: Float32Array,
  xOffset: number,
) {
  const stride = rowWords('q4', cols);
  const d = m.data;
  const t = f16Table();
  const groups = cols / Q4_GROUP;
  const scales = cols / 8;
  let r = 0;
  for (; r + 4 <= rows; r += 4) {
    const b0 = r * stride;
    const b1 = b0 + stride;
    const b2 = b1 + stride;
    const b3 = b2 + stride;
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    for (let g = 0; g < groups; g++) {
      const si = scales + (g >> 1);
      const sh = 16 * (g & 1);
      const s0 = t[(d[b0 + si] >>> sh) & 0xffff];
      const s1 = t[(d[b1 + si] >>> sh) & 0xffff];
      const s2 = t[(d[b2 + si] >>> sh) & 0xffff];
      const s3 = t[(d[b3 + si] >>> sh) & 0xffff];
      for (let k = 0; k < 4; k++) {
        const wi = 4 * g + k;
        const w0 = d[b0 + wi];
        const w1 = d[b1 + wi];
        const w2 = d[b2 + wi];
        const w3 = d[b3 + wi];
        const xb = xOffset + g * Q4_GROUP + 8 * k;
        for (let i = 0; i < 8; i++) {
          const xv = x[xb + i];
          const q = 4 * i;
          a0 += (((w0 >>> q) & 15) - 8) * s0 * xv;
          a1 += (((w1 >>> q) & 15) - 8) * s1 * xv;
          a2 += (((w2 >>> q) & 15) - 8) * s2 * xv;
          a3 += (((w3 >>> q) & 15) - 8) * s3 * xv;
        }
      }
    }
    out[r] = a0;
    out[r + 1] = a1;
    out[r + 2] = a2;
    out[r + 3] = a3;
  }
  for (; r < rows; r++) {
    const b = r * stride;
    let a = 0;
    for (let g = 0; g < groups; g++) {
      const s = t[(d[b + scales + (g >> 1)] >>> (16 * (g & 1))) & 0xffff];
      for (let k = 0; k < 4; k++) {
        const w = d[b + 4 * g + k];
        const xb = xOffset + g * Q4_GROUP + 8 * k;
        for (let i = 0; i < 8; i++) a += (((w >>> (4 * i)) & 15) - 8) * s * x[xb + i];
      }
    }
    out[r] = a;
  }
}

function checkPacked(w: Exclude<Matrix, Float32Array>, rows: number, cols: number): void {
  if (w.rows !== rows || w.cols !== cols)
    throw new RangeError(`a [${w.rows}, ${w.cols}] ${w.format} matrix used as [${rows}, ${cols}]`);
}

function matvecF32(w: Float32Array, rows: number, cols: number, x: Float32Array, out: Float32Array, xOffset: number) {
  let r = 0;
  for (; r + 4 <= rows; r += 4) {
    const b0 = r * cols;
    const b1 = b0 + cols;
    const b2 = b1 + cols;
    const b3 = b2 + cols;
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    for (let c = 0; c < cols; c++) {
      const xv = x[xOffset + c];
      a0 += w[b0 + c] * xv;
      a1 += w[b1 + c] * xv;
      a2 += w[b2 + c] * xv;
      a3 += w[b3 + c] * xv;
    }
    out[r] = a0;
    out[r + 1] = a1;
    out[r + 2] = a2;
    out[r + 3] = a3;
  }
  for (; r < rows; r++) {
    let acc = 0;
    const base = r * cols;
    for (let c = 0; c < cols; c++) acc += w[base + c] * x[xOffset + c];
    out[r] = acc;
  }
}

/**
 * Y[n, rows] = X[n, cols] * W^T, W [rows, cols]. Blocked 2 x 4 (inputs x weight rows) so
 * each loaded value feeds several accumulators; the sums are the same dot products as
 * matvec's, in the same order, so prefill and decode agree bit for bit.
 */
export function matmul(w: Matrix, rows: number, cols: number, x: Float32Array, n: number, out: Float32Array): void {
  if (w instanceof Float32Array) {
    matmulF32(w, rows, cols, x, n, out, rows, 0);
    return;
  }
  checkPacked(w, rows, cols);
  // Tile by tile: each tile of rows is dequantised once and serves every input row.
  const T = tileRows(cols);
  for (let r0 = 0; r0 < rows; r0 += T) {
    const t = Math.min(T, rows - r0);
    matmulF32(dequantizeTile(w, r0, t), t, cols, x, n, out, rows, r0);
  }
}

/** matmul of a [rows, cols] W into columns [outCol, outCol + rows) of out, whose rows are `outStride` long. */
function matmulF32(
  w: Float32Array,
  rows: number,
  cols: number,
  x: Float32Array,
  n: number,
  out: Float32Array,
  outStride: number,
  outCol: number,
): void {
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    const x0 = i * cols;
    const x1 = x0 + cols;
    let r = 0;
    for (; r + 4 <= rows; r += 4) {
      const b0 = r * cols;
      const b1 = b0 + cols;
      const b2 = b1 + cols;
      const b3 = b2 + cols;
      let a00 = 0,
        a01 = 0,
        a02 = 0,
        a03 = 0,
        a10 = 0,
        a11 = 0,
        a12 = 0,
        a13 = 0;
      for (let c = 0; c < cols; c++) {
        const u = x[x0 + c];
        const v = x[x1 + c];
        const w0 = w[b0 + c];
        const w1 = w[b1 + c];
        const w2 = w[b2 + c];
        const w3 = w[b3 + c];
        a00 += w0 * u;
        a01 += w1 * u;
        a02 += w2 * u;
        a03 += w3 * u;
        a10 += w0 * v;
        a11 += w1 * v;
        a12 += w2 * v;
        a13 += w3 * v;
      }
      const o0 = i * outStride + outCol + r;
      const o1 = o0 + outStride;
      out[o0] = a00;
      out[o0 + 1] = a01;
      out[o0 + 2] = a02;
      out[o0 + 3] = a03;
      out[o1] = a10;
      out[o1 + 1] = a11;
      out[o1 + 2] = a12;
      out[o1 + 3] = a13;
    }
    for (; r < rows; r++) {
      let a0 = 0;
      let a1 = 0;
      const b = r * cols;
      for (let c = 0; c < cols; c++) {
        a0 += w[b + c] * x[x0 + c];
        a1 += w[b + c] * x[x1 + c];
      }
      out[i * outStride + outCol + r] = a0;
      out[(i + 1) * outStride + outCol + r] = a1;
    }
  }
  for (; i < n; i++) {
    const o = i * outStride + outCol;
    matvecF32(w, rows, cols, x, out.subarray(o, o + rows), i * cols);
  }
}

/** Adds `bias` [width] to each of n rows of x [n, width]: the q/k/v biases of the Qwen2 family, before RoPE. */
export function addBias(x: Float32Array, bias: Float32Array | undefined, width: number, n = 1): void {
  if (!bias) return;
  for (let i = 0; i < n; i++) {
    const b = i * width;
    for (let c = 0; c < width; c++) x[b + c] += bias[c];
  }
}

/** RMSNorm of n rows of `dim`: y = x / sqrt(mean(x^2) + eps) * weight. */
export function rmsnorm(
  x: Float32Array,
  weight: Float32Array,
  eps: number,
  dim: number,
  n: number,
  out: Float32Array,
): void {
  for (let i = 0; i < n; i++) {
    const b = i * dim;
    let ss = 0;
    for (let c = 0; c < dim; c++) ss += x[b + c] * x[b + c];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let c = 0; c < dim; c++) out[b + c] = x[b + c] * inv * weight[c];
  }
}

/** RoPE inverse frequencies theta^(-2i/headDim), i < headDim/2. */
export function ropeFrequencies(headDim: number, theta: number): Float64Array {
  const half = headDim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = Math.pow(theta, (-2 * i) / headDim);
  return f;
}

/**
 * Rotate-half RoPE in place on `numHeads` heads of one position, starting at `offset`:
 * (x[i], x[i+half]) -> (x[i] cos - x[i+half] sin, x[i+half] cos + x[i] sin).
 */
export function rope(
  x: Float32Array,
  offset: number,
  numHeads: number,
  headDim: number,
  pos: number,
  freqs: Float64Array,
): void {
  const half = headDim / 2;
  for (let i = 0; i < half; i++) {
    const a = pos * freqs[i];
    const cos = Math.cos(a);
    const sin = Math.sin(a);
    for (let h = 0; h < numHeads; h++) {
      const b = offset + h * headDim;
      const x0 = x[b + i];
      const x1 = x[b + i + half];
      x[b + i] = x0 * cos - x1 * sin;
      x[b + i + half] = x1 * cos + x0 * sin;
    }
  }
}

/** out = silu(gate) * up, elementwise. */
export function swiglu(gate: Float32Array, up: Float32Array, out: Float32Array, length = gate.length): void {
  for (let i = 0; i < length; i++) {
    const g = gate[i];
    out[i] = (g / (1 + Math.exp(-g))) * up[i];
  }
}

export { argmax } from './argmax.js';

export interface PagedHead {
  /** Page ids of this (layer, KV head), in table order. */
  pages: ArrayLike<number>;
  pageCount: number;
}

/**
 * Decode attention of the `group` query heads that share one KV head, over that
 * head's pages. q is [group, headDim] at qOffset; out is [group, headDim] at outOffset.
 * If `weightsOut` is given, the softmax weight of every visited slot, summed over the
 * group, is added to weightsOut[position - positionBase] for positions >= positionBase
 * and < positionBase + weightsOut.length (audio offsets for the policies).
 */
export function pagedAttention(
  q: Float32Array,
  qOffset: number,
  group: number,
  headDim: number,
  head: PagedHead,
  pageSize: number,
  kPool: Float32Array,
  vPool: Float32Array,
  positions: Int32Array,
  out: Float32Array,
  outOffset: number,
  weightsOut?: Float32Array,
  positionBase = 0,
  scratch?: { scores: Float64Array; acc: Float64Array },
  /** First slot held by kPool/vPool: a sharded pool passes one shard's arrays (slots stay pool-wide). */
  slotBase = 0,
): void {
  const scale = 1 / Math.sqrt(headDim);
  const slots = head.pageCount * pageSize;
  const scores = scratch && scratch.scores.length >= slots ? scratch.scores : new Float64Array(slots);
  const acc = scratch && scratch.acc.length >= headDim ? scratch.acc : new Float64Array(headDim);
  for (let j = 0; j < group; j++) {
    const qb = qOffset + j * headDim;
    let max = -Infinity;
    for (let p = 0; p < head.pageCount; p++) {
      const page = head.pages[p];
      for (let s = 0; s < pageSize; s++) {
        const slot = page * pageSize + s;
        const idx = p * pageSize + s;
        const pos = positions[slot];
        if (pos === EMPTY_SLOT) {
          scores[idx] = -Infinity;
          continue;
        }
        let dot = 0;
        const kb = (slot - slotBase) * headDim;
        for (let d = 0; d < headDim; d++) dot += q[qb + d] * kPool[kb + d];
        // A summary slot (negative entry) stands for a group of positions: + ln(count).
        scores[idx] = dot * scale + (pos < 0 ? slotBias(pos) : 0);
        if (scores[idx] > max) max = scores[idx];
      }
    }
    let sum = 0;
    for (let i = 0; i < slots; i++) {
      const e = scores[i] === -Infinity ? 0 : Math.exp(scores[i] - max);
      scores[i] = e;
      sum += e;
    }
    const ob = outOffset + j * headDim;
    acc.fill(0, 0, headDim);
    for (let p = 0; p < head.pageCount; p++) {
      const page = head.pages[p];
      for (let s = 0; s < pageSize; s++) {
        const w = scores[p * pageSize + s] / sum;
        if (w === 0) continue;
        const slot = page * pageSize + s;
        const vb = (slot - slotBase) * headDim;
        for (let d = 0; d < headDim; d++) acc[d] += w * vPool[vb + d];
        if (weightsOut) {
          const a = positions[slot] - positionBase;
          if (a >= 0 && a < weightsOut.length) weightsOut[a] += w;
        }
      }
    }
    for (let d = 0; d < headDim; d++) out[ob + d] = acc[d];
  }
}

/**
 * Causal self-attention over a whole prompt of n positions. q [n, H*hd], k and v
 * [n, Hkv*hd], out [n, H*hd]. For each window of `scoresOut` (one Float32Array per KV
 * head, length = audioLength), the softmax weights of the last `lastQueries` query
 * positions on positions audioStart .. audioStart+audioLength-1 are summed over the
 * group into it.
 */
export function causalAttention(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  n: number,
  numHeads: number,
  numKvHeads: number,
  headDim: number,
  out: Float32Array,
  scoresOut?: { windows: Array<{ lastQueries: number; perKvHead: Float32Array[] }>; audioStart: number },
  capture?: { fromRow: number; onRow: (head: number, row: number, expScores: Float64Array, sum: number) => void },
): void {
  const group = numHeads / numKvHeads;
  const scale = 1 / Math.sqrt(headDim);
  const qd = numHeads * headDim;
  const kvd = numKvHeads * headDim;
  const row = new Float64Array(n);
  const qv = new Float64Array(headDim);
  // One KV head's keys contiguous and its values transposed, so both inner loops are
  // unit-stride dot products (this is what makes CPU prefill usable for evaluation).
  const kh_ = new Float32Array(n * headDim);
  const vt = new Float32Array(headDim * n);
  const windows =
    scoresOut?.windows.map((w) => ({ first: Math.max(0, n - w.lastQueries), perKvHead: w.perKvHead })) ?? [];
  const firstScored = Math.min(n, ...windows.map((w) => w.first));
  for (let kh = 0; kh < numKvHeads; kh++) {
    for (let t = 0; t < n; t++) {
      const src = t * kvd + kh * headDim;
      for (let d = 0; d < headDim; d++) {
        kh_[t * headDim + d] = k[src + d];
        vt[d * n + t] = v[src + d];
      }
    }
    for (let h = kh * group; h < (kh + 1) * group; h++) {
      for (let i = 0; i < n; i++) {
        const qb = i * qd + h * headDim;
        for (let d = 0; d < headDim; d++) qv[d] = q[qb + d];
        let max = -Infinity;
        for (let t = 0; t <= i; t++) {
          const kb = t * headDim;
          let dot = 0;
          let d = 0;
          for (; d + 4 <= headDim; d += 4) {
            dot +=
              qv[d] * kh_[kb + d] +
              qv[d + 1] * kh_[kb + d + 1] +
              qv[d + 2] * kh_[kb + d + 2] +
              qv[d + 3] * kh_[kb + d + 3];
          }
          for (; d < headDim; d++) dot += qv[d] * kh_[kb + d];
          const sc = dot * scale;
          row[t] = sc;
          if (sc > max) max = sc;
        }
        let sum = 0;
        for (let t = 0; t <= i; t++) {
          const e = Math.exp(row[t] - max);
          row[t] = e;
          sum += e;
        }
        const ob = i * qd + h * headDim;
        const inv = 1 / sum;
        for (let d = 0; d < headDim; d++) {
          const vb = d * n;
          let a = 0;
          for (let t = 0; t <= i; t++) a += row[t] * vt[vb + t];
          out[ob + d] = a * inv;
        }
        if (capture && i >= capture.fromRow) capture.onRow(h, i, row, sum);
        if (scoresOut && i >= firstScored) {
          const a0 = scoresOut.audioStart;
          for (const w of windows) {
            if (i < w.first) continue;
            const dst = w.perKvHead[kh];
            const end = Math.min(i + 1, a0 + dst.length);
            for (let t = a0; t < end; t++) dst[t - a0] += row[t] * inv;
          }
        }
      }
    }
  }
}
