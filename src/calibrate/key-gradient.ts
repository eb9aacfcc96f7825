/**
 * The pieces of a Head Sensitivity gradient that the triage's estimators share (answer-path.ts,
 * direct-sensitivity.ts): the gradient at the final hidden states, the transposed products and
 * the RMSNorm's backward, and the key gradient's norms from a layer's answer rows.
 */
import type { PrefillExtras } from '../reference/prefill.js';
import { matrixRow, type Matrix } from '../reference/matrix.js';
import { matvec, rmsnorm } from '../reference/ops.js';
import type { ModelConfig } from '../model/config.js';
import type { ComputeWeights } from '../model/packed-weights.js';

/**
 * ∂CE_t/∂x_t for each answer row (rows from `first` predict answer[t]), through the final
 * RMSNorm and the LM head: [answer.length, hiddenSize], and each token's CE.
 */
export function answerResidualGradient(
  c: ModelConfig,
  w: ComputeWeights,
  hidden: Float32Array,
  first: number,
  answer: number[],
): { grad: Float32Array; ce: Float64Array } {
  const D = c.hiddenSize;
  const V = c.vocabSize;
  const T = answer.length;
  const xn = new Float32Array(D);
  const logits = new Float32Array(V);
  // Softmax minus the one-hot target, per row: the CE's gradient at the logits.
  const dl = new Float32Array(T * V);
  const ce = new Float64Array(T);
  for (let t = 0; t < T; t++) {
    rmsnorm(hidden.subarray((first + t) * D, (first + t + 1) * D), w.norm, c.rmsNormEps, D, 1, xn);
    matvec(w.lmHead, V, D, xn, logits);
    let max = -Infinity;
    for (let i = 0; i < V; i++) max = Math.max(max, logits[i]);
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp(logits[i] - max);
    ce[t] = max + Math.log(sum) - logits[answer[t]];
    for (let i = 0; i < V; i++) dl[t * V + i] = Math.exp(logits[i] - max) / sum;
    dl[t * V + answer[t]] -= 1;
  }
  const gy = new Float64Array(T * D);
  transposedProduct(w.lmHead, V, D, dl, T, gy);
  const grad = new Float64Array(T * D);
  for (let t = 0; t < T; t++)
    rmsnormBackward(
      hidden.subarray((first + t) * D, (first + t + 1) * D),
      w.norm,
      c.rmsNormEps,
      gy.subarray(t * D, (t + 1) * D),
      grad.subarray(t * D, (t + 1) * D),
    );
  return { grad: Float32Array.from(grad), ce };
}

/**
 * A prefill capture that keeps each answer row's audio attention per layer and query head
 * into rows[t][layer · numHeads + head] (the Voice Score's rows, and the key gradient's a).
 */
export function answerRowsCapture(
  c: ModelConfig,
  rows: Float32Array[][],
  first: number,
  a0: number,
  N: number,
): NonNullable<PrefillExtras['capture']> {
  return {
    fromRow: first,
    onRow: (layer, head, i, e, s) => {
      const a = new Float32Array(N);
      for (let p = 0; p < N; p++) a[p] = e[a0 + p] / s;
      rows[i - first][layer * c.numHeads + head] = a;
    },
  };
}

/** out[t] (+)= Wᵀ y[t] for T rows: W [rows, cols], y [T, rows], out [T, cols]; one pass over W. */
export function transposedProduct(
  w: Matrix,
  rows: number,
  cols: number,
  y: ArrayLike<number>,
  T: number,
  out: Float64Array,
): void {
  const row = new Float32Array(cols);
  for (let i = 0; i < rows; i++) {
    matrixRow(w, i, cols, row);
    for (let t = 0; t < T; t++) {
      const g = y[t * rows + i];
      if (g === 0) continue;
      const o = t * cols;
      for (let j = 0; j < cols; j++) out[o + j] += g * row[j];
    }
  }
}

/** ∂/∂x of y = w ⊙ x / rms(x) applied to gy, one row of D: ∂y_i/∂x_j = w_i (δ_ij / rms − x_i x_j / (D rms³)). */
export function rmsnormBackward(
  x: ArrayLike<number>,
  weight: Float32Array,
  eps: number,
  gy: ArrayLike<number>,
  out: Float64Array,
  D = weight.length,
): void {
  let ss = 0;
  for (let d = 0; d < D; d++) ss += x[d] * x[d];
  const rms = Math.sqrt(ss / D + eps);
  let dot = 0;
  for (let d = 0; d < D; d++) dot += weight[d] * gy[d] * x[d];
  for (let d = 0; d < D; d++) out[d] += (weight[d] * gy[d]) / rms - (x[d] * dot) / (D * rms * rms * rms);
}

/**
 * The per-answer-row, per-KV-head sum over audio positions of ‖∂CE_t/∂k_τ‖ / N for one layer,
 * from the answer rows' queries q and attention outputs o ([T, numHeads · headDim]), their
 * audio attention a[t][head] (N), the layer's V ([n, numKvHeads · headDim]) and δ = W_Oᵀ r.
 */
export function keyGradientNorms(
  c: ModelConfig,
  q: Float32Array,
  o: Float32Array,
  a: (t: number, head: number) => Float32Array,
  v: Float32Array,
  delta: Float64Array,
  T: number,
  a0: number,
  N: number,
  into: number[],
  at: number,
): void {
  const hd = c.headDim;
  const g = c.numHeads / c.numKvHeads;
  const qd = c.numHeads * hd;
  const kvd = c.numKvHeads * hd;
  const scale = 1 / Math.sqrt(hd);
  const G = new Float64Array(hd);
  for (let kh = 0; kh < c.numKvHeads; kh++) {
    let total = 0;
    for (let t = 0; t < T; t++) {
      // (o_t,h · δ_t,h) once per query head; (v_τ · δ_t,h) per position below.
      const oDelta = new Float64Array(g);
      for (let j = 0; j < g; j++) {
        const h = kh * g + j;
        for (let d = 0; d < hd; d++) oDelta[j] += o[t * qd + h * hd + d] * delta[t * qd + h * hd + d];
      }
      let norms = 0;
      for (let p = 0; p < N; p++) {
        G.fill(0);
        const vo = (a0 + p) * kvd + kh * hd;
        for (let j = 0; j < g; j++) {
          const h = kh * g + j;
          let vDelta = 0;
          for (let d = 0; d < hd; d++) vDelta += v[vo + d] * delta[t * qd + h * hd + d];
          const coef = a(t, h)[p] * (vDelta - oDelta[j]) * scale;
          for (let d = 0; d < hd; d++) G[d] += coef * q[t * qd + h * hd + d];
        }
        let n2 = 0;
        for (let d = 0; d < hd; d++) n2 += G[d] * G[d];
        norms += Math.sqrt(n2);
      }
      total += norms / N;
    }
    into[at + kh] = total;
  }
}
