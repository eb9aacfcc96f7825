/** The reference a paged decode is held to: the whole sequence recomputed densely, causal, and the last row's logits. */
import { prefillLayers } from '../../src/reference/prefill.js';
import { matvec, rmsnorm, ropeFrequencies } from '../../src/reference/ops.js';
import { promptLength, type ModelConfig } from '../../src/model/config.js';
import type { DecoderWeights } from '../../src/model/weights.js';
import type { AttentionRequest } from '../../src/kv/plan.js';

/** Logits after the prompt of `N` audio embeddings and `tokens` generated after it. */
export function denseLogits(
  config: ModelConfig,
  weights: DecoderWeights,
  audio: Float32Array,
  N: number,
  request: AttentionRequest,
  tokens: number[],
): Float32Array {
  const r = prefillLayers(config, weights, ropeFrequencies(config.headDim, config.ropeTheta), audio, N, request, {
    suffix: tokens,
  });
  const D = config.hiddenSize;
  const n = promptLength(config, N) + tokens.length;
  const xn = new Float32Array(D);
  rmsnorm(r.hidden.subarray((n - 1) * D, n * D), weights.norm, config.rmsNormEps, D, 1, xn);
  const logits = new Float32Array(config.vocabSize);
  matvec(weights.lmHead, config.vocabSize, D, xn, logits);
  return logits;
}
