/**
 * Head triage of one clip on the GPU, with the weights the backend already holds (any
 * format: the transposed products read q4 and f16 as they are): the two teacher-forced
 * forwards of src/calibrate/direct-sensitivity.ts, which is its plain-TS reference.
 *
 *   1. the prefill over [prefix][audio][instruction][answer] leaves every row's final hidden
 *      state in the prefill buffers; per answer row the final norm, the LM head, softmax
 *      minus one-hot (logit_grad), back through the LM head (matmul_t, per row part) and the
 *      final norm (norm_grad) give r_t = ∂CE_t/∂x_t;
 *   2. a second prefill copies the answer rows' queries and attention outputs out of each
 *      layer's blocks; after each layer, their audio attention (answer_attention, the Voice
 *      Score's rows), δ = W_Oᵀ r (matmul_t) and the direct-path key gradient's norms
 *      (head_sensitivity) are computed and read back, a layer's worth at a time.
 *
 * Nothing of the model is copied to the host: what comes back is the attention rows
 * (T × heads × audio floats a layer) and T × KV heads sums a layer.
 */
import type { ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import { record, sharedUniforms, type Dispatch } from '../../gpu/op.js';
import type { Kernels } from './kernels.js';
import type { PrefillBuffers, SessionBuffers } from './session-buffers.js';
import type { GpuWeights } from './weights.js';
import { readBack, runPrefill } from './prefill.js';
import type { AnswerRows, TriageKernels } from './triage-ops.js';
import type { ClipTriage } from '../types.js';

export async function runTriage(
  ctx: GpuContext,
  c: ModelConfig,
  k: Kernels,
  tk: TriageKernels,
  w: GpuWeights,
  s: SessionBuffers,
  p: PrefillBuffers,
  audio: Float32Array,
  answer: number[],
  r: AnswerRows,
): Promise<ClipTriage> {
  const T = answer.length;
  const D = c.hiddenSize;
  const H = c.numHeads;
  const HKV = c.numKvHeads;
  const QD = H * c.headDim;
  const N = r.audioLength;
  const made: GPUBuffer[] = [];
  const buf = (label: string, floats: number) => {
    const b = ctx.buffer(`triage.${label}`, 4 * Math.max(1, floats));
    made.push(b);
    return b;
  };
  try {
    const tapQ = buf('q', T * QD);
    const tapO = buf('o', T * QD);
    const delta = buf('delta', T * QD);
    const hn = buf('normed', T * D);
    const rg = buf('r', T * D);
    const dl = buf('dl', T * c.vocabSize);
    const gy = buf('gy', T * D);
    const ce = buf('ce', T);
    const a = buf('a', T * H * N);
    const hs = buf('hs', T * HKV);
    const u = sharedUniforms(ctx, (b) => made.push(b));
    const run = (enc: GPUCommandEncoder, ds: Dispatch[]) => {
      for (const d of ds) {
        const pass = enc.beginComputePass();
        record(pass, d);
        pass.end();
      }
    };
    const request = { decodeHeads: [], prefillQueries: 0 };
    await runPrefill(ctx, c, k, w, s, p, audio, request, false);
    const enc = ctx.device.createCommandEncoder({ label: 'triage gradient' });
    run(enc, [k.rmsnorm.run({ x: p.x, w: w.norm, y: hn }, { rows: T, inRow0: r.first }, u)]);
    const head = w.kernels(w.lmHead.format);
    for (let t = 0; t < T; t++)
      run(enc, [
        ...head.matvec.run({ w: w.lmHead, x: hn, y: s.logits }, u, t * D),
        tk.logitGrad({ logits: s.logits, dl, ce }, r, t, answer[t], u),
      ]);
    // Every row's dl back through the LM head at once: one pass over the head's weights.
    run(enc, tk.matmulT(w.lmHead.format).run({ w: w.lmHead, x: dl, y: gy }, T, u));
    for (let t = 0; t < T; t++) run(enc, [tk.normGrad({ gy, r: rg, hidden: p.x, norm: w.norm }, r, t, u)]);
    ctx.device.queue.submit([enc.finish()]);
    const rows: Float32Array[][] = answer.map(() => new Array<Float32Array>(c.numLayers * H));
    const sum = new Array<number>(c.numLayers * HKV).fill(0);
    await runPrefill(
      ctx,
      c,
      k,
      w,
      s,
      p,
      audio,
      request,
      false,
      async (l) => {
        const { k: kl, v: vl } = p.kvOf(l);
        const L = w.layers[l];
        const e = ctx.device.createCommandEncoder({ label: `triage layer ${l}` });
        run(e, [
          tk.answerAttention({ q: tapQ, k: kl, ml: p.ml, a }, r, u),
          ...tk.matmulT(L.o.format).run({ w: L.o, x: rg, y: delta }, T, u),
          tk.headSensitivity({ q: tapQ, v: vl, a, o: tapO, delta, hs }, r, u),
        ]);
        ctx.device.queue.submit([e.finish()]);
        const [ab, hb] = await readBack(ctx, [
          [a, 4 * T * H * N],
          [hs, 4 * T * HKV],
        ]);
        const all = new Float32Array(ab);
        for (let t = 0; t < T; t++)
          for (let h = 0; h < H; h++) rows[t][l * H + h] = all.slice((t * H + h) * N, (t * H + h + 1) * N);
        const sums = new Float32Array(hb);
        for (let t = 0; t < T; t++) for (let kh = 0; kh < HKV; kh++) sum[l * HKV + kh] += sums[t * HKV + kh];
      },
      { first: r.first, q: tapQ, attn: tapO },
    );
    const [ceb] = await readBack(ctx, [[ce, 4 * T]]);
    const ces = new Float32Array(ceb);
    return { rows, sum, tokens: T, meanCe: ces.reduce((x, y) => x + y, 0) / T };
  } finally {
    for (const b of made) ctx.destroy(b);
  }
}
