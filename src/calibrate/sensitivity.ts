/**
 * Head Sensitivity without autograd: a forward-only estimate of ‖∂CE_t/∂K‖ for each KV
 * head's audio keys, run on the runtime's own decoder (the CPU reference, teacher-forced).
 *
 * Estimator (random-direction finite differences): for head (l, k) draw M Gaussian
 * directions u (unit variance per entry, over the head's N × headDim audio keys), add ε·u to
 * those keys in layer l, run the layers from l on and take every answer token's CE_t. For a
 * gradient g_t = ∂CE_t/∂K_audio, E[(u·g_t)²] = ‖g_t‖², and
 * CE_t(K + εu) − CE_t(K) = ε u·g_t + O(ε²), so
 *
 *   ‖g_t‖ ≈ sqrt(mean over u of (CE_t(K + εu) − CE_t(K))²) / ε.
 *
 * One perturbed forward gives the difference of every answer token at once, so the
 * per-token norms cost nothing extra. ε is `step` × the RMS of the head's audio keys (a
 * relative step keeps the difference above f32 rounding and inside the linear regime).
 * The paper's HS averages per-position norms ‖∂CE_t/∂K_τ‖ over τ; the directions see only
 * the Frobenius norm over all positions, so the estimate divides it by √N: the RMS over
 * positions, an upper bound of their mean that equals it when the gradient is spread
 * evenly. That is the approximation to keep in mind; heads.json marks the estimate with
 * `sensitivityEstimator: 'finite-difference'`.
 *
 * Cost per clip: one unperturbed forward, then per KV head M forwards of the layers from
 * its own (the residual stream entering each layer is kept from the unperturbed pass), i.e.
 * M · H_kv · Σ_l (L − l) / L ≈ M · H_kv · (L + 1) / 2 full forwards, no backward.
 */
import { prefillLayers } from '../reference/prefill.js';
import { matvec, rmsnorm, ropeFrequencies } from '../reference/ops.js';
import { audioStart, promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';
import { rng } from '../model/testing.js';

export interface SensitivityOptions {
  /** Random directions per head (M); default 4. */
  directions?: number;
  /** ε relative to the RMS of the head's audio keys; default 1e-2. */
  step?: number;
  seed?: number;
  /** The prompt around the audio; default the config's. */
  prompt?: PromptIds;
  /**
   * Audio positions perturbed together; default all N. Smaller blocks bring the estimate
   * from the RMS over positions towards their mean norm, at N / blockSize times the cost.
   */
  blockSize?: number;
  /** Called as each KV head is done (1-based count, of numLayers · numKvHeads): the page's progress per head. */
  onHead?: (done: number, total: number) => void;
}

export interface ClipSensitivity {
  /** Per KV head (flat layer · numKvHeads + head): the sum over answer tokens of the estimated per-position norm. */
  sum: number[];
  /** Answer tokens the sums run over. */
  tokens: number;
  /** Mean CE of the unperturbed teacher-forced answer. */
  meanCe: number;
}

/** Teacher-forced CE of each answer token from the final hidden states (rows from `first` predict answer[j]). */
export function answerCe(
  c: ModelConfig,
  w: DecoderWeights,
  hidden: Float32Array,
  first: number,
  answer: number[],
): Float64Array {
  const D = c.hiddenSize;
  const xn = new Float32Array(D);
  const logits = new Float32Array(c.vocabSize);
  return Float64Array.from(answer, (t, j) => {
    rmsnorm(hidden.subarray((first + j) * D, (first + j + 1) * D), w.norm, c.rmsNormEps, D, 1, xn);
    matvec(w.lmHead, c.vocabSize, D, xn, logits);
    let max = -Infinity;
    for (let i = 0; i < c.vocabSize; i++) max = Math.max(max, logits[i]);
    let sum = 0;
    for (let i = 0; i < c.vocabSize; i++) sum += Math.exp(logits[i] - max);
    return max + Math.log(sum) - logits[t];
  });
}

/** Standard normal samples from a seeded uniform source (Box–Muller). */
function gaussian(rand: () => number): () => number {
  return () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

/**
 * The estimate for one clip: `audio` holds N audio embeddings, `answer` the answer tokens the
 * CE is taken on (transcript + eos, as training/head_sensitivity.py).
 */
export function clipSensitivity(
  c: ModelConfig,
  w: DecoderWeights,
  audio: Float32Array,
  N: number,
  answer: number[],
  opts: SensitivityOptions = {},
): ClipSensitivity {
  const M = opts.directions ?? 4;
  const step = opts.step ?? 1e-2;
  const prompt = opts.prompt ?? c;
  if (answer.length === 0) throw new Error('no answer tokens to take the CE on');
  const freqs = ropeFrequencies(c.headDim, c.ropeTheta);
  const request = { decodeHeads: [], prefillQueries: 0 };
  const suffix = answer.slice(0, -1);
  const first = promptLength(prompt, N) - 1;
  const a0 = audioStart(prompt);
  const hd = c.headDim;
  const kvd = c.numKvHeads * hd;
  const inputs: Float32Array[] = [];
  const base = prefillLayers(c, w, freqs, audio, N, request, {
    prompt,
    suffix,
    keepKv: false,
    onLayerInput: (_, x) => inputs.push(Float32Array.from(x)),
  });
  const ce0 = answerCe(c, w, base.hidden, first, answer);
  const normal = gaussian(rng(opts.seed ?? 1));
  const sum: number[] = [];
  const B = Math.max(1, Math.min(N, opts.blockSize ?? N));
  for (let l = 0; l < c.numLayers; l++) {
    for (let kh = 0; kh < c.numKvHeads; kh++) {
      const norm = new Float64Array(answer.length);
      let eps = 0;
      for (let b0 = 0; b0 < N; b0 += B) {
        const b1 = Math.min(N, b0 + B);
        const sq = new Float64Array(answer.length);
        for (let m = 0; m < M; m++) {
          const out = prefillLayers(c, w, freqs, audio, N, request, {
            prompt,
            suffix,
            keepKv: false,
            resume: { layer: l, hidden: inputs[l] },
            onKeys: (layer, k) => {
              if (layer !== l) return;
              if (eps === 0) {
                let ss = 0;
                for (let p = 0; p < N; p++) for (let d = 0; d < hd; d++) ss += k[(a0 + p) * kvd + kh * hd + d] ** 2;
                eps = step * Math.sqrt(ss / (N * hd)) || step;
              }
              for (let p = b0; p < b1; p++)
                for (let d = 0; d < hd; d++) k[(a0 + p) * kvd + kh * hd + d] += eps * normal();
            },
          });
          const ce = answerCe(c, w, out.hidden, first, answer);
          for (let t = 0; t < answer.length; t++) sq[t] += (ce[t] - ce0[t]) ** 2;
        }
        // The block's norm over its positions, as (its RMS per position) × (its positions): summed over blocks, divided by N below.
        for (let t = 0; t < answer.length; t++) norm[t] += (Math.sqrt(sq[t] / M) / eps) * Math.sqrt(b1 - b0);
      }
      sum.push(norm.reduce((a, x) => a + x, 0) / N);
      opts.onHead?.(sum.length, c.numLayers * c.numKvHeads);
    }
  }
  return { sum, tokens: answer.length, meanCe: ce0.reduce((a, b) => a + b, 0) / answer.length };
}
