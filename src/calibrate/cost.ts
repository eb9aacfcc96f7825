/** What a calibration costs, in decoder forwards (no engine code: the page's own bundle imports it). */
import type { ModelConfig } from '../model/config.js';

/**
 * How a clip's Head Sensitivity is estimated: 'answer-path' (one forward and a backward of
 * the answer rows, answer-path.ts; what a backend's `triage` runs), 'direct-path' (two
 * forwards a clip, direct-sensitivity.ts) or 'finite-difference' (M random directions per KV
 * head, sensitivity.ts); the last two on the CPU reference.
 */
export type TriageEstimator = 'answer-path' | 'direct-path' | 'finite-difference';

/** The estimator a calibration uses unless asked for another (chosen on calibration clips: docs/calibrate-real-model.md). */
export const DEFAULT_ESTIMATOR: TriageEstimator = 'answer-path';

/**
 * Forward passes one clip costs, in full decoder forwards. 'answer-path': one teacher-forced
 * pass, whose answer rows' backward costs about one more pass over the weights for those rows
 * alone (answer-path.ts; in `triageFlops`, not here). 'direct-path': two teacher-forced
 * passes, the second keeping the Voice Score's rows (direct-sensitivity.ts).
 * 'finite-difference': the Voice Score's teacher-forced pass, the Head Sensitivity's
 * unperturbed pass, then per KV head of layer l, M forwards of the layers from l on
 * (sensitivity.ts): 2 + M · H_kv · Σ_l (L − l) / L.
 */
export function forwardsPerClip(
  c: Pick<ModelConfig, 'numLayers' | 'numKvHeads'>,
  estimator: TriageEstimator,
  directions: number,
): number {
  if (estimator === 'answer-path') return 1;
  if (estimator === 'direct-path') return 2;
  const L = c.numLayers;
  let layers = 0;
  for (let l = 0; l < L; l++) layers += L - l;
  return 2 + (directions * c.numKvHeads * layers) / L;
}

/** Clips a triage takes unless asked otherwise (the CLI's --limit, the demo's count): chosen on calibration data (docs/calibrate-real-model.md). */
export const DEFAULT_TRIAGE_CLIPS = 8;

/** FLOPs of one layer over n rows: the projections and the MLP (2 per multiply-add), and causal attention (QKᵀ and AV over n(n+1)/2 pairs). */
export function layerFlops(c: ModelConfig, n: number): number {
  const D = c.hiddenSize;
  const qd = c.numHeads * c.headDim;
  const kvd = c.numKvHeads * c.headDim;
  const matrices = D * (qd + 2 * kvd) + qd * D + 3 * D * c.intermediateSize;
  return 2 * n * matrices + 2 * 2 * qd * ((n * (n + 1)) / 2);
}

/** FLOPs of the LM head on T rows: its V × D product per row. */
export function headFlops(c: ModelConfig, T: number): number {
  return 2 * T * c.vocabSize * c.hiddenSize;
}

/**
 * FLOPs of the answer path's triage of one clip (answer-path.ts, backend/webgpu/triage.ts)
 * over n prompt rows with T answer rows and N audio tokens: one forward of the layers; the LM
 * head on the answer rows and back through it; per layer, for the T rows, the MLP and W_O
 * again and back through them, through the queries' softmax over the n keys and W_Q, the
 * answer rows' audio attention and the key gradients' norms.
 */
export function triageFlops(c: ModelConfig, n: number, T: number, N: number): number {
  const D = c.hiddenSize;
  const qd = c.numHeads * c.headDim;
  const perLayer =
    2 * T * D * c.intermediateSize * 5 + // gate and up again, and back through down, gate and up
    2 * T * D * qd * 3 + // W_O o again, δ = W_Oᵀ r and W_Qᵀ dq
    2 * T * c.numHeads * n * c.headDim * 3 + // the queries' scores again, v·δ and dq
    2 * T * c.numHeads * N * c.headDim + // answer attention
    T * N * c.numHeads * 4 * c.headDim + // per query head: v·δ and its share of the key gradient
    T * N * c.numKvHeads * 2 * c.headDim; // the norms
  return c.numLayers * layerFlops(c, n) + 2 * headFlops(c, T) + c.numLayers * perLayer;
}
