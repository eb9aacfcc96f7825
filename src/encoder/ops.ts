/**
 * Plain-TS f32 kernels of the Whisper-family encoder: the reference the WebGPU kernels are
 * checked against. Activations are time-major [rows, width] row-major; weights keep
 * PyTorch's layout (Linear [out, in], Conv1d [out, in, k]). Storage is f32, sums are
 * accumulated in float64 so the reference's own rounding stays far below what is compared.
 */

/** erf(z) to float64 accuracy: erf = 2/√π·e^{-z²}·Σ 2ⁿz^{2n+1}/(1·3·…·(2n+1)), all terms positive. */
export function erf(z: number): number {
  const a = Math.abs(z);
  if (a >= 6) return Math.sign(z); // erfc(6) ≈ 2e-17
  const z2 = a * a;
  let term = a;
  let sum = a;
  for (let n = 1; n < 200; n++) {
    term *= (2 * z2) / (2 * n + 1);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  const r = (2 / Math.sqrt(Math.PI)) * Math.exp(-z2) * sum;
  return z < 0 ? -r : r;
}

/** The exact (erf) GELU the checkpoints were trained with, in place. */
export function geluInPlace(x: Float32Array): Float32Array {
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    x[i] = 0.5 * v * (1 + erf(v * Math.SQRT1_2));
  }
  return x;
}

/** y[r, o] = b[o] + Σ_i x[r, i]·w[o, i]; w is [outDim, inDim]. */
export function linear(
  x: Float32Array,
  rows: number,
  inDim: number,
  w: Float32Array,
  bias: Float32Array | null,
  outDim: number,
): Float32Array {
  const y = new Float32Array(rows * outDim);
  for (let r = 0; r < rows; r++) {
    const xo = r * inDim;
    const yo = r * outDim;
    let o = 0;
    // Four outputs per pass share each load of x.
    for (; o + 4 <= outDim; o += 4) {
      const w0 = o * inDim,
        w1 = w0 + inDim,
        w2 = w1 + inDim,
        w3 = w2 + inDim;
      let a0 = 0,
        a1 = 0,
        a2 = 0,
        a3 = 0;
      for (let i = 0; i < inDim; i++) {
        const v = x[xo + i];
        a0 += v * w[w0 + i];
        a1 += v * w[w1 + i];
        a2 += v * w[w2 + i];
        a3 += v * w[w3 + i];
      }
      y[yo + o] = a0 + (bias ? bias[o] : 0);
      y[yo + o + 1] = a1 + (bias ? bias[o + 1] : 0);
      y[yo + o + 2] = a2 + (bias ? bias[o + 2] : 0);
      y[yo + o + 3] = a3 + (bias ? bias[o + 3] : 0);
    }
    for (; o < outDim; o++) {
      let a = 0;
      const wo = o * inDim;
      for (let i = 0; i < inDim; i++) a += x[xo + i] * w[wo + i];
      y[yo + o] = a + (bias ? bias[o] : 0);
    }
  }
  return y;
}

/** LayerNorm over the last axis (biased variance, eps inside the root), into a new array. */
export function layerNorm(
  x: Float32Array,
  rows: number,
  dim: number,
  gamma: Float32Array,
  beta: Float32Array,
  eps = 1e-5,
): Float32Array {
  const y = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i];
    mean /= dim;
    let v = 0;
    for (let i = 0; i < dim; i++) v += (x[o + i] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / dim + eps);
    for (let i = 0; i < dim; i++) y[o + i] = (x[o + i] - mean) * inv * gamma[i] + beta[i];
  }
  return y;
}

/**
 * Conv1d with kernel 3, padding 1, and `stride`, on time-major input [tIn, cIn]; returns
 * time-major [floor((tIn − 1) / stride) + 1, cOut]. `wk` is the weight re-laid out as
 * [cOut, 3, cIn] (see `convWeightTimeMajor`), so each tap is a contiguous dot product.
 */
export function conv1dK3(
  x: Float32Array,
  tIn: number,
  cIn: number,
  wk: Float32Array,
  bias: Float32Array,
  cOut: number,
  stride: number,
): Float32Array {
  const tOut = Math.floor((tIn - 1) / stride) + 1;
  const y = new Float32Array(tOut * cOut);
  for (let t = 0; t < tOut; t++) {
    const c0 = t * stride - 1;
    for (let o = 0; o < cOut; o++) {
      let acc = bias[o];
      for (let k = 0; k < 3; k++) {
        const src = c0 + k;
        if (src < 0 || src >= tIn) continue; // zero padding
        const wo = (o * 3 + k) * cIn;
        const xo = src * cIn;
        for (let i = 0; i < cIn; i++) acc += x[xo + i] * wk[wo + i];
      }
      y[t * cOut + o] = acc;
    }
  }
  return y;
}

/** PyTorch Conv1d weight [cOut, cIn, 3] → [cOut, 3, cIn]. */
export function convWeightTimeMajor(w: Float32Array, cOut: number, cIn: number): Float32Array {
  const out = new Float32Array(w.length);
  for (let o = 0; o < cOut; o++) {
    for (let i = 0; i < cIn; i++) {
      for (let k = 0; k < 3; k++) out[(o * 3 + k) * cIn + i] = w[(o * cIn + i) * 3 + k];
    }
  }
  return out;
}

/**
 * Multi-head softmax attention of one window: q, k, v time-major [t, heads·hd]; queries
 * attend to keys [0, keys) only (Qwen2-Audio masks the padding frames as keys).
 * q is expected already scaled by hd^-0.5.
 */
export function attention(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  t: number,
  heads: number,
  hd: number,
  keys = t,
): Float32Array {
  const d = heads * hd;
  const out = new Float32Array(t * d);
  const s = new Float64Array(keys);
  const acc = new Float64Array(hd);
  for (let h = 0; h < heads; h++) {
    const ho = h * hd;
    for (let i = 0; i < t; i++) {
      const qo = i * d + ho;
      let max = -Infinity;
      for (let j = 0; j < keys; j++) {
        const ko = j * d + ho;
        let dot = 0;
        for (let c = 0; c < hd; c++) dot += q[qo + c] * k[ko + c];
        s[j] = dot;
        if (dot > max) max = dot;
      }
      let sum = 0;
      for (let j = 0; j < keys; j++) {
        const e = Math.exp(s[j] - max);
        s[j] = e;
        sum += e;
      }
      acc.fill(0);
      for (let j = 0; j < keys; j++) {
        const p = s[j];
        const vo = j * d + ho;
        for (let c = 0; c < hd; c++) acc[c] += p * v[vo + c];
      }
      const inv = 1 / sum;
      for (let c = 0; c < hd; c++) out[qo + c] = acc[c] * inv;
    }
  }
  return out;
}

/** AvgPool1d(2, stride 2) over time: floor(rows / 2) rows, an odd last row dropped. */
export function avgPool2(x: Float32Array, rows: number, dim: number): Float32Array {
  const n = rows >> 1;
  const y = new Float32Array(n * dim);
  for (let r = 0; r < n; r++) {
    const a = 2 * r * dim;
    for (let i = 0; i < dim; i++) y[r * dim + i] = 0.5 * (x[a + i] + x[a + dim + i]);
  }
  return y;
}

/** Whisper's sinusoids(length, channels): [sin(t·inv) | cos(t·inv)], inv = 10000^(−i/(C/2 − 1)). */
export function sinusoids(length: number, channels: number): Float32Array {
  const half = channels >> 1;
  const inc = Math.log(10000) / (half - 1);
  const out = new Float32Array(length * channels);
  for (let t = 0; t < length; t++) {
    for (let i = 0; i < half; i++) {
      const a = t * Math.exp(-inc * i);
      out[t * channels + i] = Math.sin(a);
      out[t * channels + half + i] = Math.cos(a);
    }
  }
  return out;
}
