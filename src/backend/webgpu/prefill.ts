/**
 * Prefill on the GPU: [bos][audio][instruction] through every layer with causal
 * attention, keeping each layer's post-RoPE K/V (the policy chooses from them), the
 * prefill scores the policy asked for, and the greedy token after the prompt. One
 * submit per layer keeps each submit short (browsers' GPU watchdogs).
 *
 * Each layer runs over blocks of `prefillChunk` rows, in order: a block's queries attend
 * to the keys of every row up to its end, which this and the earlier blocks have written,
 * so causal attention needs no more than that. Only the hidden states and each layer's
 * K/V hold the whole prompt; the wide per-row buffers (QKV, queries, attention output,
 * the MLP's) hold one block, within one storage binding and with little memory however
 * long the recording. Prefill scores add up block by block.
 */
import { kvHeadCount, type ModelConfig } from '../../model/config.js';
import type { AttentionRequest } from '../../policy/types.js';
import type { Gather } from '../../kv/residency.js';
import type { GpuContext, Bindings } from './device.js';
import type { GpuPool } from './pool.js';
import { grid, matmulGroups, matvecGroups, type Kernels } from './kernels.js';
import type { PrefillBuffers, SessionBuffers } from './session.js';
import type { GpuWeights } from './weights.js';

export interface GpuPrefillOutput {
  token: number;
  logits?: Float32Array;
  scores: Float32Array[];
  keys?: Float32Array[];
}

async function readBack(ctx: GpuContext, parts: [GPUBuffer, number][]): Promise<ArrayBuffer[]> {
  const total = parts.reduce((n, [, b]) => n + Math.ceil(b / 16) * 16, 0);
  const staging = ctx.buffer('prefill.readback', total, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
  const enc = ctx.device.createCommandEncoder();
  let off = 0;
  const offs: number[] = [];
  for (const [buf, bytes] of parts) {
    offs.push(off);
    if (bytes > 0) enc.copyBufferToBuffer(buf, 0, staging, off, Math.ceil(bytes / 4) * 4);
    off += Math.ceil(bytes / 16) * 16;
  }
  ctx.device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const range = staging.getMappedRange();
  const out = parts.map(([, bytes], i) => range.slice(offs[i], offs[i] + bytes));
  staging.unmap();
  ctx.destroy(staging);
  return out;
}

export async function runPrefill(
  ctx: GpuContext, c: ModelConfig, k: Kernels, w: GpuWeights, s: SessionBuffers, p: PrefillBuffers,
  audio: Float32Array, request: AttentionRequest, returnLogits: boolean,
): Promise<GpuPrefillOutput> {
  const A = s.sizes.audioLength;
  const n = s.sizes.promptLength;
  const D = c.hiddenSize;
  const I = c.intermediateSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const q = ctx.device.queue;
  const ids = new Int32Array(n);
  ids[0] = c.tokens.bos;
  for (let i = 0; i < A; i++) ids[1 + i] = -1 - i;
  c.instruction.forEach((t, i) => (ids[1 + A + i] = t));
  q.writeBuffer(p.ids, 0, ids);
  if (A > 0) q.writeBuffer(p.audio, 0, audio.buffer, audio.byteOffset, A * D * 4);
  const uni = (label: string, v: number[]) => p.adopt(ctx.uniform(label, v));
  const rows = uni('u.rows', [n, 0, 0, 0]);
  const firstQuery = Number.isFinite(request.prefillQueries) ? Math.max(0, n - request.prefillQueries) : 0;
  // Row blocks: [first row, rows, uniforms]. Offsets are multiples of 64 rows, which keeps
  // every sub-binding at a multiple of the 256-byte storage offset alignment.
  const C = s.sizes.prefillChunk;
  const blocks = Array.from({ length: Math.ceil(n / C) }, (_, b) => {
    const r0 = b * C;
    const m = Math.min(C, n - r0);
    return {
      r0, m,
      uRows: uni(`u.rows${b}`, [m, 0, 0, 0]),
      uQkv: uni(`u.qkv${b}`, [QD + 2 * KVD, D, m, 0]),
      uO: uni(`u.o${b}`, [D, QD, m, 0]),
      uRope: uni(`u.rope${b}`, [m, r0, 0, 0]),
      uGu: uni(`u.gate_up${b}`, [2 * I, D, m, 0]),
      uAct: uni(`u.act${b}`, [m, 0, 0, 0]),
      uDown: uni(`u.down${b}`, [D, I, m, 0]),
    };
  });
  const rowsOf = (buffer: GPUBuffer, width: number, r0: number, m: number): GPUBufferBinding => ({ buffer, offset: 4 * r0 * width, size: 4 * m * width });
  const run = (enc: GPUCommandEncoder, pipeline: GPUComputePipeline, res: Bindings, x: number, y = 1) => {
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, ctx.bindGroup(pipeline, res));
    pass.dispatchWorkgroups(x, y);
    pass.end();
  };
  let enc = ctx.device.createCommandEncoder({ label: 'prefill embed' });
  run(enc, k.embed, [w.embed, p.ids, p.audio, p.x, rows], ...grid(n));
  enc.clearBuffer(p.scores);
  for (let l = 0; l < c.numLayers; l++) {
    const L = w.layers[l];
    for (const b of blocks) {
      const x = rowsOf(p.x, D, b.r0, b.m);
      const attnU = uni(`u.attn${l}.${b.r0}`, [b.r0 + b.m, 1, A, firstQuery, l, 0, 0, b.r0]);
      run(enc, k.rmsnorm, [x, L.attnNorm, p.h, b.uRows], Math.ceil(b.m / 64));
      run(enc, k.matmul, [L.qkv, p.h, p.qkv, b.uQkv], ...matmulGroups(QD + 2 * KVD, b.m));
      run(enc, k.ropeSplit, { 1: p.qkv, 2: p.q, 3: rowsOf(p.k[l], KVD, b.r0, b.m), 4: rowsOf(p.v[l], KVD, b.r0, b.m), 5: s.rope, 8: b.uRope }, b.m);
      run(enc, k.causalAttention, [p.q, p.k[l], p.v[l], p.attn, p.ml, attnU], Math.ceil(b.m / 64), c.numHeads);
      if (A > 0 && b.r0 + b.m > firstQuery) run(enc, k.prefillScores, { 0: p.q, 1: p.k[l], 5: attnU, 6: p.scores, 7: p.ml }, Math.ceil(A / 64), c.numKvHeads);
      run(enc, k.matmulAdd, [L.o, p.attn, x, b.uO], ...matmulGroups(D, b.m));
      run(enc, k.rmsnorm, [x, L.mlpNorm, p.h, b.uRows], Math.ceil(b.m / 64));
      run(enc, k.matmul, [L.gateUp, p.h, p.gateUp, b.uGu], ...matmulGroups(2 * I, b.m));
      run(enc, k.swiglu, [p.gateUp, p.act, b.uAct], ...grid(Math.ceil((b.m * I) / 64)));
      run(enc, k.matmulAdd, [L.down, p.act, x, b.uDown], ...matmulGroups(D, b.m));
    }
    q.submit([enc.finish()]);
    enc = ctx.device.createCommandEncoder({ label: `prefill layer ${l + 1}` });
  }
  // Only the last prompt row goes through the final norm and the LM head.
  run(enc, k.rmsnorm, [p.x, w.norm, s.h, uni('u.last', [1, n - 1, 0, 0])], 1);
  run(enc, k.matvec, [w.lmHead, s.h, s.logits, uni('u.lm', [c.vocabSize, D, 1, 0])], ...matvecGroups(c.vocabSize));
  run(enc, k.argmax, [s.logits, s.tokenOut], 1);
  q.submit([enc.finish()]);
  const heads = kvHeadCount(c);
  const parts: [GPUBuffer, number][] = [[s.tokenOut, 4], [s.logits, returnLogits ? 4 * c.vocabSize : 0], [p.scores, 4 * heads * A]];
  if (request.prefillKeys) for (let l = 0; l < c.numLayers; l++) parts.push([p.k[l], 4 * n * KVD]);
  const got = await readBack(ctx, parts);
  const token = new Uint32Array(got[0])[0];
  const allScores = new Float32Array(got[2]);
  const scores = Array.from({ length: heads }, (_, h) => allScores.slice(h * A, (h + 1) * A));
  let keys: Float32Array[] | undefined;
  if (request.prefillKeys) {
    keys = [];
    const hd = c.headDim;
    for (let l = 0; l < c.numLayers; l++) {
      const kl = new Float32Array(got[3 + l]);
      for (let kh = 0; kh < c.numKvHeads; kh++) {
        const out = new Float32Array(A * hd);
        for (let a = 0; a < A; a++) out.set(kl.subarray((1 + a) * KVD + kh * hd, (1 + a) * KVD + (kh + 1) * hd), a * hd);
        keys.push(out);
      }
    }
  }
  return { token, logits: returnLogits ? new Float32Array(got[1]) : undefined, scores, keys };
}

/** Reads back the prefill K and V of the given layers (for CPU copies): [n, KVD] each. */
export async function readPrefillKv(ctx: GpuContext, c: ModelConfig, p: PrefillBuffers, n: number, layers: number[]): Promise<Map<number, { k: Float32Array; v: Float32Array }>> {
  const bytes = 4 * n * c.numKvHeads * c.headDim;
  const parts: [GPUBuffer, number][] = [];
  for (const l of layers) parts.push([p.k[l], bytes], [p.v[l], bytes]);
  const got = parts.length ? await readBack(ctx, parts) : [];
  const out = new Map<number, { k: Float32Array; v: Float32Array }>();
  layers.forEach((l, i) => out.set(l, { k: new Float32Array(got[2 * i]), v: new Float32Array(got[2 * i + 1]) }));
  return out;
}

/** Copies the prefill rows the residency placed on the GPU into their pool slots. */
export function gatherIntoPool(ctx: GpuContext, c: ModelConfig, k: Kernels, pool: GpuPool, p: PrefillBuffers, gathers: Gather[]): void {
  const perLayer: number[][] = Array.from({ length: c.numLayers }, () => []);
  for (const g of gathers) {
    const l = Math.floor(g.head / c.numKvHeads);
    const kh = g.head % c.numKvHeads;
    for (let i = 0; i < g.slots.length; i++) perLayer[l].push(g.slots[i], g.seqPositions[i], kh);
  }
  const flat = new Uint32Array(perLayer.reduce((n, e) => n + e.length, 0));
  let off = 0;
  const firsts: number[] = [];
  for (const e of perLayer) {
    firsts.push(off / 3);
    flat.set(e, off);
    off += e.length;
  }
  if (flat.length === 0) return;
  const entries = p.adopt(ctx.buffer('prefill.gather', flat.byteLength, undefined, flat));
  const enc = ctx.device.createCommandEncoder({ label: 'prefill gather' });
  const pass = enc.beginComputePass();
  pass.setPipeline(k.gather);
  perLayer.forEach((e, l) => {
    const count = e.length / 3;
    if (count === 0) return;
    const u = p.adopt(ctx.uniform(`u.gather${l}`, [firsts[l], count, pool.baseSlot(l), 0]));
    pass.setBindGroup(0, ctx.bindGroup(k.gather, [entries, p.k[l], p.v[l], pool.kOf(l), pool.vOf(l), u]));
    pass.dispatchWorkgroups(...grid(Math.ceil((count * c.headDim) / 64)));
  });
  pass.end();
  ctx.device.queue.submit([enc.finish()]);
}
