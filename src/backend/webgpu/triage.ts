/**
 * Head triage of one clip on the GPU, with the weights the backend already holds (any
 * format: the transposed products read q4 and f16 as they are): the forward and answer-row
 * backward of src/calibrate/answer-path.ts, which is its plain-TS reference.
 *
 *   1. the prefill over [prefix][audio][instruction][answer] copies, per layer, the answer
 *      rows' input, queries and attention outputs (prefill taps) and the layer's K and V;
 *   2. per answer row the final norm, the LM head, softmax minus one-hot (logit_grad), back
 *      through the LM head (matmul_t) and the final norm (norm_grad) give r = ∂CE_t/∂x_t;
 *   3. layer by layer downwards, for the T rows: the attention's residual and the MLP's gate
 *      and up again (the prefill's own matmuls), back through down, SwiGLU, gate and up and
 *      the MLP norm; δ = W_Oᵀ r; each row's softmax over the keys again, which gives the
 *      Voice Score's audio attention and the score gradient (query_grad); the key gradients'
 *      norms (head_sensitivity); and on to the layer's input through the queries (query_back,
 *      W_QKVᵀ with only the query columns set) and the attention norm.
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
  const KVD = HKV * c.headDim;
  const I = c.intermediateSize;
  const L = c.numLayers;
  const N = r.audioLength;
  const n = r.first + T;
  const kvBytes = p.kvElementBytes * n * KVD;
  const made: GPUBuffer[] = [];
  const buf = (label: string, floats: number, bytes = 4 * floats) => {
    const b = ctx.buffer(`triage.${label}`, Math.max(4, bytes));
    made.push(b);
    return b;
  };
  try {
    const kept = Array.from({ length: L }, (_, l) => ({
      input: buf(`input ${l}`, T * D),
      q: buf(`q ${l}`, T * QD),
      attn: buf(`o ${l}`, T * QD),
      k: buf(`k ${l}`, 0, kvBytes),
      v: buf(`v ${l}`, 0, kvBytes),
    }));
    const hn = buf('normed', T * D);
    const dl = buf('dl', T * c.vocabSize);
    const gy = buf('gy', T * D);
    const ce = buf('ce', T);
    const rA = buf('r', T * D);
    const rB = buf('r mid', T * D);
    const mid = buf('mid', T * D);
    const gu = buf('gate up', T * 2 * I);
    const dact = buf('dact', T * I);
    const dgu = buf('dgu', T * 2 * I);
    const dx = buf('dx', T * D);
    const delta = buf('delta', T * QD);
    const coef = buf('coef', T * H * n);
    const dqkv = buf('dqkv', T * (QD + 2 * KVD));
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
        // The next layer overwrites the prefill's K/V: copied out while they are this layer's.
        const e = ctx.device.createCommandEncoder({ label: `triage keep ${l}` });
        e.copyBufferToBuffer(p.kvOf(l).k, 0, kept[l].k, 0, kvBytes);
        e.copyBufferToBuffer(p.kvOf(l).v, 0, kept[l].v, 0, kvBytes);
        ctx.device.queue.submit([e.finish()]);
      },
      { first: r.first, of: (l) => kept[l] },
    );
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
    run(enc, [tk.normGrad({ gy, out: rA, hidden: p.x, norm: w.norm }, r, r.first, false, u)]);
    // The key and value columns of dqkv stay zero: W_QKVᵀ dqkv is then W_Qᵀ dq.
    enc.clearBuffer(dqkv);
    ctx.device.queue.submit([enc.finish()]);
    const rows: Float32Array[][] = answer.map(() => new Array<Float32Array>(L * H));
    const sum = new Array<number>(L * HKV).fill(0);
    let [rIn, rOut] = [rA, rB];
    for (let l = L - 1; l >= 0; l--) {
      const W = w.layers[l];
      const K = kept[l];
      const wk = w.kernels;
      const e = ctx.device.createCommandEncoder({ label: `triage layer ${l}` });
      e.copyBufferToBuffer(K.input, 0, mid, 0, 4 * T * D);
      run(e, [
        wk(W.o.format).matmulAdd.run({ w: W.o, x: K.attn, y: mid }, T, u),
        k.rmsnorm.run({ x: mid, w: W.mlpNorm, y: hn }, { rows: T }, u),
        wk(W.gateUp.format).matmul.run({ w: W.gateUp, x: hn, y: gu }, T, u),
        ...tk.matmulT(W.down.format).run({ w: W.down, x: rIn, y: dact }, T, u),
        tk.swigluGrad({ gu, dact, dgu }, r, u),
        ...tk.matmulT(W.gateUp.format).run({ w: W.gateUp, x: dgu, y: dx }, T, u),
      ]);
      e.copyBufferToBuffer(rIn, 0, rOut, 0, 4 * T * D);
      run(e, [
        tk.normGrad({ gy: dx, out: rOut, hidden: mid, norm: W.mlpNorm }, r, 0, true, u),
        ...tk.matmulT(W.o.format).run({ w: W.o, x: rOut, y: delta }, T, u),
        tk.queryGrad({ q: K.q, k: K.k, v: K.v, o: K.attn, delta, a, coef }, r, n, u),
        tk.headSensitivity({ q: K.q, v: K.v, a, o: K.attn, delta, hs }, r, u),
      ]);
      if (l > 0)
        run(e, [
          tk.queryBack({ coef, k: K.k, rope: s.rope, dqkv }, r, n, u),
          ...tk.matmulT(W.qkv.format).run({ w: W.qkv, x: dqkv, y: dx }, T, u),
          tk.normGrad({ gy: dx, out: rOut, hidden: K.input, norm: W.attnNorm }, r, 0, true, u),
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
      [rIn, rOut] = [rOut, rIn];
    }
    const [ceb] = await readBack(ctx, [[ce, 4 * T]]);
    const ces = new Float32Array(ceb);
    return { rows, sum, tokens: T, meanCe: ces.reduce((x, y) => x + y, 0) / T };
  } finally {
    for (const b of made) ctx.destroy(b);
  }
}
