/**
 * Prefill of [prefix][audio][instruction] with full causal attention, with the prefill
 * scores the policy asked for and every layer's keys and values: kept for the policies to
 * choose from afterwards, or handed to `onLayer` as each layer completes (a per-layer
 * prefill places them at once and one layer's arrays serve the next). With `kvF16` the
 * post-RoPE K/V are rounded to f16 before attention reads them, as the WebGPU prefill
 * stores them for an f16 pool.
 */
import { audioStart, kvHeadCount, promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { ComputeWeights } from '../model/packed-weights.js';
import type { AttentionRequest, PolicyLayout } from '../kv/plan.js';
import { instructionRows, policyLayout } from '../kv/prompt.js';
import { addBias, causalAttention, matmul, rmsnorm, rope, swiglu } from './ops.js';
import { roundF16 } from '../kv/precision.js';
import { matrixRow, type Matrix } from './matrix.js';

export interface PrefillOutput {
  /** Final hidden states [n, hiddenSize] (before the final norm). */
  hidden: Float32Array;
  /** Per layer, post-RoPE keys and values [n, numKvHeads * headDim]. */
  k: Float32Array[];
  v: Float32Array[];
  /** Prefill scores per window (number of last prompt queries), per KV head. */
  scores: Map<number, Float32Array[]>;
  /** Per layer, the post-RoPE queries of the instruction rows ([rows, numHeads * headDim], prompt.ts `instructionRows`): summary slots are fitted to them. */
  instructionQueries: Float32Array[];
  layout: PolicyLayout;
}

/** The prompt's input rows: embed(prefix), the audio embeddings, embed(instruction), embed(suffix). */
export function promptInputs(
  c: ModelConfig,
  embed: Matrix,
  audio: Float32Array,
  N: number,
  suffix: number[] = [],
  prompt: PromptIds = c,
): Float32Array {
  const D = c.hiddenSize;
  const a0 = audioStart(prompt);
  const n = promptLength(prompt, N) + suffix.length;
  const x = new Float32Array(n * D);
  prompt.prefix.forEach((t, i) => matrixRow(embed, t, D, x, i * D));
  x.set(audio.subarray(0, N * D), a0 * D);
  [...prompt.instruction, ...suffix].forEach((t, i) => matrixRow(embed, t, D, x, (a0 + N + i) * D));
  return x;
}

export interface PrefillExtras {
  /** The prompt around the audio; default the config's. */
  prompt?: PromptIds;
  /** Text tokens appended after the instruction (teacher forcing; the dense reference for tests). */
  suffix?: number[];
  /** Sees every query head's unnormalised softmax row (exp scores and their sum) for rows >= fromRow. */
  capture?: {
    fromRow: number;
    onRow: (layer: number, head: number, row: number, expScores: Float64Array, sum: number) => void;
  };
  /** Called as soon as a layer's rows have run, with its K/V [n, numKvHeads * headDim] and its instruction rows' queries (its scores are complete by then). */
  onLayer?: (
    layer: number,
    k: Float32Array,
    v: Float32Array,
    scores: Map<number, Float32Array[]>,
    instructionQueries: Float32Array,
  ) => void;
  /** Keep every layer's K/V in the output (default true); false reuses one layer's arrays for the next. */
  keepKv?: boolean;
  /** Round the prompt K/V to f16 (an f16 pool's precision) before the layer's attention; default false. */
  kvF16?: boolean;
  /** Sees the residual stream [n, hiddenSize] entering each layer (read only: copy what is kept). */
  onLayerInput?: (layer: number, x: Float32Array) => void;
  /** Sees a layer's post-RoPE queries and its attention output per query head, before the output projection (both [n, numHeads * headDim], read only). */
  onAttention?: (layer: number, q: Float32Array, attention: Float32Array, v: Float32Array) => void;
  /** May change a layer's post-RoPE keys [n, numKvHeads * headDim] in place before its attention reads them. */
  onKeys?: (layer: number, k: Float32Array) => void;
  /**
   * Starts at `layer` from a residual stream `onLayerInput` saw (copied, not modified): the
   * layers before it are skipped, and the output's K/V and instruction queries begin there.
   */
  resume?: { layer: number; hidden: Float32Array };
}

export function prefillLayers(
  c: ModelConfig,
  w: ComputeWeights,
  freqs: Float64Array,
  audio: Float32Array,
  N: number,
  request: AttentionRequest,
  extras: PrefillExtras = {},
): PrefillOutput {
  const suffix = extras.suffix ?? [];
  const prompt = extras.prompt ?? c;
  const D = c.hiddenSize;
  const hd = c.headDim;
  const qd = c.numHeads * hd;
  const kvd = c.numKvHeads * hd;
  const F = c.intermediateSize;
  const n = promptLength(prompt, N) + suffix.length;
  const x = extras.resume
    ? Float32Array.from(extras.resume.hidden)
    : promptInputs(c, w.embed, audio, N, suffix, prompt);
  if (x.length !== n * D)
    throw new RangeError(`resumed residual stream holds ${x.length} floats, expected ${n} x ${D}`);
  const xn = new Float32Array(n * D);
  const q = new Float32Array(n * qd);
  const att = new Float32Array(n * qd);
  const tmp = new Float32Array(n * D);
  const gate = new Float32Array(n * F);
  const up = new Float32Array(n * F);
  const ks: Float32Array[] = [];
  const vs: Float32Array[] = [];
  const keepKv = extras.keepKv ?? true;
  const shared = keepKv ? null : { k: new Float32Array(n * kvd), v: new Float32Array(n * kvd) };
  // The request's further windows come in the same pass (a few additions per weight), so a
  // kept prefill serves the next policies on the clip too.
  const windowSet = new Set([request.prefillQueries, ...(request.alsoScore ?? [])]);
  const scores = new Map(
    [...windowSet].map((wq) => [wq, Array.from({ length: kvHeadCount(c) }, () => new Float32Array(N))]),
  );
  const [q0, q1] = instructionRows(prompt, N);
  const instructionQueries: Float32Array[] = [];
  for (let l = extras.resume?.layer ?? 0; l < c.numLayers; l++) {
    const L = w.layers[l];
    extras.onLayerInput?.(l, x);
    const k = shared ? shared.k : new Float32Array(n * kvd);
    const v = shared ? shared.v : new Float32Array(n * kvd);
    rmsnorm(x, L.attnNorm, c.rmsNormEps, D, n, xn);
    matmul(L.q, qd, D, xn, n, q);
    matmul(L.k, kvd, D, xn, n, k);
    matmul(L.v, kvd, D, xn, n, v);
    addBias(q, L.qBias, qd, n);
    addBias(k, L.kBias, kvd, n);
    addBias(v, L.vBias, kvd, n);
    for (let i = 0; i < n; i++) {
      rope(q, i * qd, c.numHeads, hd, i, freqs);
      rope(k, i * kvd, c.numKvHeads, hd, i, freqs);
    }
    if (extras.kvF16) {
      roundF16(k, n * kvd, k);
      roundF16(v, n * kvd, v);
    }
    extras.onKeys?.(l, k);
    causalAttention(
      q,
      k,
      v,
      n,
      c.numHeads,
      c.numKvHeads,
      hd,
      att,
      {
        windows: [...scores].map(([lastQueries, perHead]) => ({
          lastQueries,
          perKvHead: perHead.slice(l * c.numKvHeads, (l + 1) * c.numKvHeads),
        })),
        audioStart: audioStart(prompt),
      },
      extras.capture
        ? { fromRow: extras.capture.fromRow, onRow: (h, i, e, sum) => extras.capture!.onRow(l, h, i, e, sum) }
        : undefined,
    );
    extras.onAttention?.(l, q, att, v);
    matmul(L.o, D, qd, att, n, tmp);
    for (let i = 0; i < n * D; i++) x[i] += tmp[i];
    rmsnorm(x, L.mlpNorm, c.rmsNormEps, D, n, xn);
    matmul(L.gate, F, D, xn, n, gate);
    matmul(L.up, F, D, xn, n, up);
    swiglu(gate, up, gate);
    matmul(L.down, D, F, gate, n, tmp);
    for (let i = 0; i < n * D; i++) x[i] += tmp[i];
    const iq = q.slice(q0 * qd, q1 * qd);
    instructionQueries.push(iq);
    extras.onLayer?.(l, k, v, scores, iq);
    if (keepKv) {
      ks.push(k);
      vs.push(v);
    }
  }
  return { hidden: x, k: ks, v: vs, scores, instructionQueries, layout: policyLayout(c, N, prompt) };
}

/** Per KV head, the post-RoPE audio keys [N, headDim] (page key bounds for Quest/ArkVale). */
export function audioKeys(c: ModelConfig, k: Float32Array[], N: number, a0: number): Float32Array[] {
  return k.flatMap((kl) => layerAudioKeys(c, kl, N, a0));
}

/** One layer's audio keys per KV head, from its K [n, numKvHeads * headDim] whose audio starts at row a0. */
export function layerAudioKeys(c: ModelConfig, k: Float32Array, N: number, a0: number): Float32Array[] {
  const hd = c.headDim;
  const kvd = c.numKvHeads * hd;
  return Array.from({ length: c.numKvHeads }, (_, kh) => {
    const out = new Float32Array(N * hd);
    for (let p = 0; p < N; p++) out.set(k.subarray((a0 + p) * kvd + kh * hd, (a0 + p) * kvd + (kh + 1) * hd), p * hd);
    return out;
  });
}
