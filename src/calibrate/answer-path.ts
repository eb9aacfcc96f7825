/**
 * Head Sensitivity from one teacher-forced forward and a backward over the answer rows
 * alone: the gradient of each answer token's CE with respect to a KV head's audio keys along
 * every path that stays on the answer rows. A key k_τ of layer l moves the attention of
 * every answer row at layer l; from there the change runs up the residual stream of that
 * row through the later layers' norms, queries, attention (over keys and values held as
 * they are) and MLPs to the LM head. What is left out is the change that reaches an answer
 * token through another row's keys or values in a later layer (the audio rows' own
 * attention re-mixing their values); training/head_sensitivity.py --answer-path is the
 * PyTorch statement of the same quantity (keys and values detached, queries live).
 *
 *   1. the forward over [prefix][audio][instruction][answer] keeps each layer's K and V
 *      and, per answer row, the layer's input, post-RoPE queries and attention output;
 *   2. r = ∂CE_t/∂x_t at the final hidden state (the LM head and the final norm,
 *      key-gradient.ts), then layer by layer downwards: through the MLP and its norm
 *      to the attention's residual, δ = W_Oᵀ r per query head, the key gradient
 *
 *        ∂CE_t/∂k_τ = Σ_{h in the KV head's group} a_t,h,τ ((v_τ − o_t,h) · δ_t,h) / √d · q_t,h,
 *
 *      whose norm is averaged over the audio positions τ and summed over answer tokens, and
 *      on to the layer's input through the queries (softmax, RoPE, W_Q) and the attention
 *      norm. Rows do not mix on the way down (other rows' keys and values are held), so the
 *      per-token norms are exact for this quantity.
 *
 * It costs one forward of the clip and a backward of T rows; the forward's audio attention
 * of the answer rows is the Voice Score's, so that is the clip's whole triage.
 */
import { prefillLayers } from '../reference/prefill.js';
import { matvec, rmsnorm, ropeFrequencies } from '../reference/ops.js';
import { audioStart, promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { ComputeWeights } from '../model/packed-weights.js';
import type { ClipTriage } from '../backend/types.js';
import {
  answerResidualGradient,
  answerRowsCapture,
  keyGradientNorms,
  rmsnormBackward,
  transposedProduct,
} from './key-gradient.js';

/** One clip's Voice Score rows and answer-path Head Sensitivity (answer: transcript + eos). */
export function answerPathTriage(
  c: ModelConfig,
  w: ComputeWeights,
  audio: Float32Array,
  N: number,
  answer: number[],
  prompt: PromptIds = c,
): ClipTriage {
  if (answer.length === 0) throw new Error('no answer tokens to take the CE on');
  const T = answer.length;
  const H = c.numHeads;
  const HKV = c.numKvHeads;
  const g = H / HKV;
  const hd = c.headDim;
  const half = hd / 2;
  const qd = H * hd;
  const kvd = HKV * hd;
  const D = c.hiddenSize;
  const F = c.intermediateSize;
  const L = c.numLayers;
  const freqs = ropeFrequencies(hd, c.ropeTheta);
  const first = promptLength(prompt, N) - 1;
  const a0 = audioStart(prompt);
  const rowsOf = (x: Float32Array, width: number) => x.slice(first * width, (first + T) * width);
  const input: Float32Array[] = [];
  const qs: Float32Array[] = [];
  const os: Float32Array[] = [];
  const rows: Float32Array[][] = answer.map(() => new Array<Float32Array>(L * H));
  const out = prefillLayers(
    c,
    w,
    freqs,
    audio,
    N,
    { decodeHeads: [], prefillQueries: 0 },
    {
      prompt,
      suffix: answer.slice(0, -1),
      keepKv: true,
      capture: {
        fromRow: first,
        onRow: (layer, head, i, e, s) => {
          const a = new Float32Array(N);
          for (let p = 0; p < N; p++) a[p] = e[a0 + p] / s;
          rows[i - first][layer * H + head] = a;
        },
      },
      onLayerInput: (_, x) => input.push(rowsOf(x, D)),
      onAttention: (_, q, att) => {
        qs.push(rowsOf(q, qd));
        os.push(rowsOf(att, qd));
      },
    },
  );
  const { grad, ce } = answerResidualGradient(c, w, out.hidden, first, answer);
  let r = Float64Array.from(grad);
  const sum = new Array<number>(L * HKV).fill(0);
  const scale = 1 / Math.sqrt(hd);
  const mid = new Float32Array(T * D);
  const xn = new Float32Array(D);
  const gate = new Float32Array(F);
  const up = new Float32Array(F);
  const dmlp = new Float64Array(T * F);
  const score = new Float64Array(promptLength(prompt, N) + T);
  for (let l = L - 1; l >= 0; l--) {
    const W = w.layers[l];
    const K = out.k[l];
    const V = out.v[l];
    // The attention's residual, x + W_O o, again for the T rows (not kept by the forward).
    const oProj = new Float32Array(D);
    for (let t = 0; t < T; t++) {
      matvec(W.o, D, qd, os[l], oProj, t * qd);
      for (let d = 0; d < D; d++) mid[t * D + d] = input[l][t * D + d] + oProj[d];
    }
    // Back through the MLP: down, SwiGLU, gate and up, the MLP norm.
    const dDown = new Float64Array(T * F);
    transposedProduct(W.down, D, F, r, T, dDown);
    const dx = new Float64Array(T * D);
    for (let t = 0; t < T; t++) {
      rmsnorm(mid.subarray(t * D, (t + 1) * D), W.mlpNorm, c.rmsNormEps, D, 1, xn);
      matvec(W.gate, F, D, xn, gate);
      matvec(W.up, F, D, xn, up);
      for (let f = 0; f < F; f++) {
        const s = 1 / (1 + Math.exp(-gate[f]));
        const dm = dDown[t * F + f];
        dmlp[t * F + f] = dm * up[f] * s * (1 + gate[f] * (1 - s));
        dDown[t * F + f] = dm * gate[f] * s;
      }
    }
    transposedProduct(W.gate, F, D, dmlp, T, dx);
    transposedProduct(W.up, F, D, dDown, T, dx);
    const rMid = Float64Array.from(r);
    for (let t = 0; t < T; t++)
      rmsnormBackward(
        mid.subarray(t * D, (t + 1) * D),
        W.mlpNorm,
        c.rmsNormEps,
        dx.subarray(t * D, (t + 1) * D),
        rMid.subarray(t * D, (t + 1) * D),
      );
    const delta = new Float64Array(T * qd);
    transposedProduct(W.o, D, qd, rMid, T, delta);
    keyGradientNorms(c, qs[l], os[l], (t, h) => rows[t][l * H + h], V, delta, T, a0, N, sum, l * HKV);
    if (l === 0) break;
    // Back through the queries: softmax over every key the row sees, RoPE, W_Q, the attention norm.
    const dq = new Float64Array(T * qd);
    for (let t = 0; t < T; t++) {
      const i = first + t;
      for (let h = 0; h < H; h++) {
        const kh = Math.floor(h / g);
        const qo = t * qd + h * hd;
        let max = -Infinity;
        for (let j = 0; j <= i; j++) {
          let s = 0;
          for (let d = 0; d < hd; d++) s += qs[l][qo + d] * K[j * kvd + kh * hd + d];
          score[j] = s * scale;
          if (score[j] > max) max = score[j];
        }
        let z = 0;
        for (let j = 0; j <= i; j++) z += score[j] = Math.exp(score[j] - max);
        let od = 0;
        for (let d = 0; d < hd; d++) od += os[l][qo + d] * delta[qo + d];
        for (let j = 0; j <= i; j++) {
          let vd = 0;
          for (let d = 0; d < hd; d++) vd += V[j * kvd + kh * hd + d] * delta[qo + d];
          const coef = (score[j] / z) * (vd - od) * scale;
          for (let d = 0; d < hd; d++) dq[qo + d] += coef * K[j * kvd + kh * hd + d];
        }
        // RoPE's transpose: the rotation by −θ.
        for (let d = 0; d < half; d++) {
          const a = i * freqs[d];
          const cos = Math.cos(a);
          const sin = Math.sin(a);
          const x0 = dq[qo + d];
          const x1 = dq[qo + d + half];
          dq[qo + d] = x0 * cos + x1 * sin;
          dq[qo + d + half] = x1 * cos - x0 * sin;
        }
      }
    }
    const dxq = new Float64Array(T * D);
    transposedProduct(W.q, qd, D, dq, T, dxq);
    for (let t = 0; t < T; t++)
      rmsnormBackward(
        input[l].subarray(t * D, (t + 1) * D),
        W.attnNorm,
        c.rmsNormEps,
        dxq.subarray(t * D, (t + 1) * D),
        rMid.subarray(t * D, (t + 1) * D),
      );
    r = rMid;
  }
  return { rows, sum, tokens: T, meanCe: ce.reduce((x, y) => x + y, 0) / T };
}
