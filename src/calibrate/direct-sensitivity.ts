/**
 * Head Sensitivity from two teacher-forced forwards, with no backward and no per-head
 * forwards: the gradient of each answer token's CE with respect to a KV head's audio keys,
 * taken along the direct path only (the head's attention output at the token's own row,
 * through the output projection and the residual stream straight to the final norm and the
 * LM head; the "logit lens" path). The paper's HS is the total derivative, with the paths
 * through later layers and through other rows; this keeps the term that needs no backward
 * and costs two forwards a clip however many heads the model has:
 *
 *   1. a forward over [prefix][audio][instruction][answer] gives the final hidden state x_t
 *      of every row predicting an answer token; from it r_t = ∂CE_t/∂x_t (the LM head's
 *      softmax minus the one-hot target, back through the LM head and the final RMSNorm);
 *   2. a second forward keeps, per layer, each answer row's queries q_t,h, attention
 *      output o_t,h and audio attention a_t,h,τ, and with δ_t,h = W_O[:, h]ᵀ r_t
 *
 *        ∂CE_t/∂k_τ ≈ Σ_{h in the KV head's group} a_t,h,τ ((v_τ − o_t,h) · δ_t,h) / √d · q_t,h,
 *
 *      whose norm is averaged over the audio positions τ (as the gradient HS averages
 *      per-position norms) and summed over answer tokens.
 *
 * The second forward's audio attention rows are the Voice Score's too, so a clip's whole
 * triage is these two forwards. `triage-options.md`'s rows measure what the shortcut costs
 * in roles and agreement against the finite differences and the autograd gradient.
 */
import { prefillLayers } from '../reference/prefill.js';
import { matrixRow } from '../reference/matrix.js';
import { matvec, rmsnorm, ropeFrequencies } from '../reference/ops.js';
import { audioStart, promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { ComputeWeights } from '../model/packed-weights.js';
import type { ClipTriage } from '../backend/types.js';

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
  // W_Uᵀ (softmax − onehot): the LM head's rows weighted by each row's gradient at the logits.
  const gy = new Float64Array(T * D);
  const row = new Float32Array(D);
  for (let i = 0; i < V; i++) {
    matrixRow(w.lmHead, i, D, row);
    for (let t = 0; t < T; t++) {
      const g = dl[t * V + i];
      for (let d = 0; d < D; d++) gy[t * D + d] += g * row[d];
    }
  }
  // Back through y = w ⊙ x / rms(x): ∂y_i/∂x_j = w_i (δ_ij / rms − x_i x_j / (D rms³)).
  const grad = new Float32Array(T * D);
  for (let t = 0; t < T; t++) {
    const x = hidden.subarray((first + t) * D, (first + t + 1) * D);
    let ss = 0;
    for (let d = 0; d < D; d++) ss += x[d] * x[d];
    const rms = Math.sqrt(ss / D + c.rmsNormEps);
    let dot = 0;
    for (let d = 0; d < D; d++) dot += w.norm[d] * gy[t * D + d] * x[d];
    for (let d = 0; d < D; d++)
      grad[t * D + d] = (w.norm[d] * gy[t * D + d]) / rms - (x[d] * dot) / (D * rms * rms * rms);
  }
  return { grad, ce };
}

/** One clip's Voice Score rows and direct-path Head Sensitivity (answer: transcript + eos). */
export function directTriage(
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
  const g = H / c.numKvHeads;
  const hd = c.headDim;
  const qd = H * hd;
  const kvd = c.numKvHeads * hd;
  const D = c.hiddenSize;
  const freqs = ropeFrequencies(hd, c.ropeTheta);
  const request = { decodeHeads: [], prefillQueries: 0 };
  const suffix = answer.slice(0, -1);
  const first = promptLength(prompt, N) - 1;
  const a0 = audioStart(prompt);
  const base = prefillLayers(c, w, freqs, audio, N, request, { prompt, suffix, keepKv: false });
  const { grad: r, ce } = answerResidualGradient(c, w, base.hidden, first, answer);
  const rows: Float32Array[][] = answer.map(() => new Array<Float32Array>(c.numLayers * H));
  const sum = new Array<number>(c.numLayers * c.numKvHeads).fill(0);
  const delta = new Float64Array(T * qd);
  const wRow = new Float32Array(qd);
  const G = new Float64Array(hd);
  prefillLayers(c, w, freqs, audio, N, request, {
    prompt,
    suffix,
    keepKv: false,
    capture: {
      fromRow: first,
      onRow: (layer, head, i, e, s) => {
        const a = new Float32Array(N);
        for (let p = 0; p < N; p++) a[p] = e[a0 + p] / s;
        rows[i - first][layer * H + head] = a;
      },
    },
    onAttention: (l, q, att, v) => {
      // δ_t = W_Oᵀ r_t, all query heads at once: W_O is [hidden, numHeads · headDim].
      delta.fill(0);
      for (let d = 0; d < D; d++) {
        matrixRow(w.layers[l].o, d, qd, wRow);
        for (let t = 0; t < T; t++) {
          const rd = r[t * D + d];
          for (let j = 0; j < qd; j++) delta[t * qd + j] += wRow[j] * rd;
        }
      }
      const scale = 1 / Math.sqrt(hd);
      for (let kh = 0; kh < c.numKvHeads; kh++) {
        let total = 0;
        for (let t = 0; t < T; t++) {
          const row = (first + t) * qd;
          // (o_t,h · δ_t,h) once per query head; (v_τ · δ_t,h) per position below.
          const oDelta = new Float64Array(g);
          for (let j = 0; j < g; j++) {
            const h = kh * g + j;
            for (let d = 0; d < hd; d++) oDelta[j] += att[row + h * hd + d] * delta[t * qd + h * hd + d];
          }
          let norms = 0;
          for (let p = 0; p < N; p++) {
            G.fill(0);
            const vo = (a0 + p) * kvd + kh * hd;
            for (let j = 0; j < g; j++) {
              const h = kh * g + j;
              let vDelta = 0;
              for (let d = 0; d < hd; d++) vDelta += v[vo + d] * delta[t * qd + h * hd + d];
              const coef = rows[t][l * H + h][p] * (vDelta - oDelta[j]) * scale;
              for (let d = 0; d < hd; d++) G[d] += coef * q[row + h * hd + d];
            }
            let n2 = 0;
            for (let d = 0; d < hd; d++) n2 += G[d] * G[d];
            norms += Math.sqrt(n2);
          }
          total += norms / N;
        }
        sum[l * c.numKvHeads + kh] = total;
      }
    },
  });
  return { rows, sum, tokens: T, meanCe: ce.reduce((a, b) => a + b, 0) / T };
}
