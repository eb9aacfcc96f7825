/**
 * The head triage on WebGPU against its plain-TS reference (src/calibrate/answer-path.ts)
 * on a Hugging Face miniature loaded by `loadModel(url)`: the same teacher-forced clip (random
 * audio embeddings, random transcript ids + the stop token) through both, in the weights'
 * format the GPU holds (the CPU computes with the same packed matrices). Compared: every
 * answer row's audio attention, each KV head's Head Sensitivity, and the roles VS × HS
 * assigns at r_GPU 0.1 / 0.2 / 0.4 (the Voice Score from synthetic word spans, the same for both).
 */
import type { LoadedModel } from '../../src/model/loader.js';
import { randomEmbeddings, rng } from '../../src/model/testing.js';
import { packDecoderWeights, packedViews } from '../../src/model/packed-weights.js';
import type { WeightFormat } from '../../src/model/quant.js';
import { answerPathTriage } from '../../src/calibrate/answer-path.js';
import { VoiceScoreAccumulator } from '../../src/calibrate/voice-score.js';
import { assignRoles, rankingScore } from '../../src/policy/wnw/triage.js';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.js';
import { gpu, type CheckResult } from './gpu-util.js';
import { shapeConfig, randomPackedWeights } from '../../src/bench/shapes.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { triagePeakBytes } from '../../src/backend/webgpu/fit.js';
import { bindingLimits } from '../../src/backend/webgpu/weight-formats.js';

const AUDIO_TOKENS = 120;
const ANSWER = 24;
/** Relative tolerance of a head's sensitivity (f32 on both sides, different summation orders). */
const HS_TOLERANCE = 1e-4;
const ROW_TOLERANCE = 1e-4;

function voiceScore(m: LoadedModel, rows: Float32Array[][], N: number): number[] {
  const c = m.config;
  const vs = new VoiceScoreAccumulator({
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    tokensPerSecond: c.audio.tokensPerSecond,
  });
  const seconds = N / c.audio.tokensPerSecond;
  rows.slice(0, -1).forEach((r, j) => {
    const start = (j * seconds) / (rows.length - 1);
    vs.addToken({ start, end: start + seconds / (rows.length - 1) }, N, (q) => r[q]);
  });
  return vs.result().voiceScore;
}

export async function triageParity(name: string, model: LoadedModel, format: WeightFormat): Promise<CheckResult> {
  const t0 = performance.now();
  const c = model.config;
  const packed = packDecoderWeights(c, model.weights, format);
  const audio = randomEmbeddings(c, AUDIO_TOKENS, 31);
  const rand = rng(7);
  const answer = [...Array.from({ length: ANSWER }, () => Math.floor(rand() * c.vocabSize)), c.stopTokens[0]];
  const ref = answerPathTriage(c, packedViews(c, packed), audio, AUDIO_TOKENS, answer);
  const { ctx } = await gpu();
  const backend = await WebGpuBackend.create(c, packed, { context: ctx });
  const live0 = ctx.liveBytes;
  let got;
  try {
    got = await backend.triage(audio, AUDIO_TOKENS, answer);
  } finally {
    backend.dispose();
  }
  let rowErr = 0;
  ref.rows.forEach((r, j) =>
    r.forEach((a, q) => {
      for (let p = 0; p < a.length; p++) rowErr = Math.max(rowErr, Math.abs(a[p] - got.rows[j][q][p]));
    }),
  );
  const hsErr = Math.max(...ref.sum.map((s, h) => Math.abs(s - got.sum[h]) / Math.max(Math.abs(s), 1e-30)));
  const vsRef = voiceScore(model, ref.rows, AUDIO_TOKENS);
  const vsGot = voiceScore(model, got.rows, AUDIO_TOKENS);
  const roles = [0.1, 0.2, 0.4].map((b) => {
    const a = assignRoles(rankingScore(vsRef, ref.sum, 'product'), b);
    const g = assignRoles(rankingScore(vsGot, got.sum, 'product'), b);
    return JSON.stringify([a.anchors, a.tidal, a.fixed]) === JSON.stringify([g.anchors, g.tidal, g.fixed]);
  });
  const ceErr = Math.abs(ref.meanCe - got.meanCe);
  const pass =
    rowErr <= ROW_TOLERANCE &&
    hsErr <= HS_TOLERANCE &&
    roles.every(Boolean) &&
    ceErr <= 1e-3 &&
    got.tokens === answer.length;
  return {
    name,
    pass,
    detail:
      `${format} weights, ${AUDIO_TOKENS} audio tokens, ${answer.length} answer rows: attention rows max |Δ| ${rowErr.toExponential(2)} (≤ ${ROW_TOLERANCE}), ` +
      `HS max relative Δ ${hsErr.toExponential(2)} (≤ ${HS_TOLERANCE}), mean CE ${ref.meanCe.toFixed(4)} vs ${got.meanCe.toFixed(4)}, ` +
      `roles equal at 0.1/0.2/0.4: ${roles.join('/')}; weights on the device ${(live0 / 2 ** 20).toFixed(1)} MiB`,
    ms: performance.now() - t0,
  };
}

/**
 * The triage's GPU memory at Voxtral-Mini-3B's widths (two of its 30 layers, so the backward
 * crosses a layer through the queries, the MLP and both norms: hidden 3,072,
 * 32 × 128 queries, 8 KV heads, MLP 8,192; random q4 weights; a quarter of its vocabulary,
 * 32,768 entries, which only scales the embedding, the head and dl): the live bytes at the
 * triage's peak, by allocation, against the fit check's figure (src/backend/webgpu/fit.ts
 * `triagePeakBytes`) for the same clip; and its values against the plain-TS reference.
 */
export async function triageMemory(): Promise<CheckResult> {
  const name = 'triage_memory_voxtral_shape';
  const t0 = performance.now();
  const c = { ...shapeConfig('voxtral-mini-3b', 2), vocabSize: 32_768 };
  const packed = randomPackedWeights(c, 'q4', 3);
  const { ctx } = await gpu();
  const base = ctx.liveBytes;
  const backend = await WebGpuBackend.create(c, packed, { context: ctx });
  const weights = ctx.liveBytes - base;
  const N = 24;
  const answer = [11, 12, 13, 14, 15, c.stopTokens[0]];
  const audio = randomEmbeddings(c, N, 5);
  let peak = 0;
  let got;
  try {
    ctx.resetPeak();
    got = await backend.triage(audio, N, answer);
    peak = ctx.peakBytes - base;
  } finally {
    backend.dispose();
  }
  // The values too, at these widths: the transposed products over the 32,768 × 3,072 head and
  // each layer's W_O, W_QKV, gate, up and down (3,072 × 8,192), against the plain-TS reference
  // on the same packed weights.
  const ref = answerPathTriage(c, packedViews(c, packed), audio, N, answer);
  const hsErr = Math.max(...ref.sum.map((x, h) => Math.abs(x - got.sum[h]) / Math.max(Math.abs(x), 1e-30)));
  let rowErr = 0;
  ref.rows.forEach((r, j) =>
    r.forEach((a, q) => a.forEach((x, p) => (rowErr = Math.max(rowErr, Math.abs(x - got.rows[j][q][p]))))),
  );
  const weightBytes = decoderWeightBytes(c, 'q4', packed.lmHead === packed.embed).total;
  const figure = triagePeakBytes(c, weightBytes, N, answer.length, 'f32', bindingLimits(ctx));
  const off = (peak - figure) / figure;
  // The triage's own share (session, its buffers, the readback), beside the weights that dominate the total.
  const own = peak - weights;
  const ownFigure = figure - weightBytes;
  const ownOff = (own - ownFigure) / ownFigure;
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
  return {
    name,
    pass: Math.abs(off) <= 0.02 && Math.abs(ownOff) <= 0.02 && hsErr <= HS_TOLERANCE && rowErr <= ROW_TOLERANCE,
    detail:
      `HS max relative Δ to the reference ${hsErr.toExponential(2)} (≤ ${HS_TOLERANCE}), attention rows ${rowErr.toExponential(2)} (≤ ${ROW_TOLERANCE}); ` +
      `live at the peak ${mib(peak)}, the fit check's ${mib(figure)} (${(100 * off).toFixed(2)} %); ` +
      `beside the weights ${mib(own)} against ${mib(ownFigure)} (${(100 * ownOff).toFixed(2)} %); both within ±2 %`,
    ms: performance.now() - t0,
  };
}
