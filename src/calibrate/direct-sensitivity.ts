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
 * triage is these two forwards. docs/calibrate-real-model.md's rows measure what the shortcut costs
 * in roles and agreement against the finite differences and the autograd gradient.
 */
import { prefillLayers } from '../reference/prefill.js';
import { ropeFrequencies } from '../reference/ops.js';
import { audioStart, promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { ComputeWeights } from '../model/packed-weights.js';
import type { ClipTriage } from '../backend/types.js';
import { answerResidualGradient, answerRowsCapture, keyGradientNorms, transposedProduct } from './key-gradient.js';

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
  const qd = H * c.headDim;
  const D = c.hiddenSize;
  const freqs = ropeFrequencies(c.headDim, c.ropeTheta);
  const request = { decodeHeads: [], prefillQueries: 0 };
  const suffix = answer.slice(0, -1);
  const first = promptLength(prompt, N) - 1;
  const a0 = audioStart(prompt);
  const base = prefillLayers(c, w, freqs, audio, N, request, { prompt, suffix, keepKv: false });
  const { grad: r, ce } = answerResidualGradient(c, w, base.hidden, first, answer);
  const rows: Float32Array[][] = answer.map(() => new Array<Float32Array>(c.numLayers * H));
  const sum = new Array<number>(c.numLayers * c.numKvHeads).fill(0);
  prefillLayers(c, w, freqs, audio, N, request, {
    prompt,
    suffix,
    keepKv: false,
    capture: answerRowsCapture(c, rows, first, a0, N),
    onAttention: (l, q, att, v) => {
      // δ_t = W_Oᵀ r_t, all query heads at once: r straight from the final norm, whatever the layer.
      const delta = new Float64Array(T * qd);
      transposedProduct(w.layers[l].o, D, qd, r, T, delta);
      const rowsOf = (x: Float32Array) => x.subarray(first * qd, (first + T) * qd);
      keyGradientNorms(
        c,
        rowsOf(q),
        rowsOf(att),
        (t, h) => rows[t][l * H + h],
        v,
        delta,
        T,
        a0,
        N,
        sum,
        l * c.numKvHeads,
      );
    },
  });
  return { rows, sum, tokens: T, meanCe: ce.reduce((a, b) => a + b, 0) / T };
}
