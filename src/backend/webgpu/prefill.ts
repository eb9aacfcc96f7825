/**
 * Prefill on the GPU: [prefix][audio][instruction] through every layer with causal
 * attention, keeping each layer's post-RoPE K/V (the policy chooses from them), the
 * prefill scores the policy asked for, and the greedy token after the prompt. One
 * submit per layer keeps each submit short (browsers' GPU watchdogs).
 *
 * Each layer runs over blocks of `prefillChunk` rows, in order: a block's queries attend
 * to the keys of every row up to its end, which this and the earlier blocks have written,
 * so causal attention needs no more than that. Only the hidden states and each layer's
 * K/V hold the whole prompt (a per-layer prefill holds one layer's K/V: `onLayer` places
 * it into the pool before the next layer overwrites it); the wide per-row buffers (QKV, queries, attention output,
 * the MLP's) hold one block, within one storage binding and with little memory however
 * long the recording. Prefill scores add up block by block.
 */
import { audioStart, kvHeadCount, type ModelConfig } from '../../model/config.js';
import type { HeadResidency, PrefillPlan } from '../../kv/plan.js';
import type { BackendRequest } from '../readouts.js';
import type { Gather, Residency } from '../../kv/residency.js';
import type { TransferStats } from '../../kv/types.js';
import type { GpuContext } from '../../gpu/device.js';
import { record, sharedUniforms, type Dispatch } from '../../gpu/op.js';
import type { GpuPool } from './pool.js';
import type { Kernels } from './kernels.js';
import { prefillAttentionUniform } from './attention-ops.js';
import type { PrefillBuffers, SessionBuffers } from './session-buffers.js';
import type { GpuWeights } from './weights.js';
import { instructionRows, summaryPlacement } from '../../kv/prompt.js';
import { kvValues } from '../../kv/precision.js';

export interface GpuPrefillOutput {
  token: number;
  logits?: Float32Array;
  scores: Float32Array[];
  keys?: Float32Array[];
}

/** Copies [buffer, bytes, source offset = 0] parts into one staging buffer and maps it. */
export async function readBack(ctx: GpuContext, parts: [GPUBuffer, number, number?][]): Promise<ArrayBuffer[]> {
  const total = parts.reduce((n, [, b]) => n + Math.ceil(b / 16) * 16, 0);
  const staging = ctx.buffer('prefill.readback', total, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
  const enc = ctx.device.createCommandEncoder();
  let off = 0;
  const offs: number[] = [];
  for (const [buf, bytes, from] of parts) {
    offs.push(off);
    if (bytes > 0) enc.copyBufferToBuffer(buf, from ?? 0, staging, off, Math.ceil(bytes / 4) * 4);
    off += Math.ceil(bytes / 16) * 16;
  }
  ctx.device.queue.submit([enc.finish()]);
  // A map that fails (a lost device) still frees the staging buffer.
  try {
    await staging.mapAsync(GPUMapMode.READ);
    const range = staging.getMappedRange();
    const out = parts.map(([, bytes], i) => range.slice(offs[i], offs[i] + bytes));
    staging.unmap();
    return out;
  } finally {
    ctx.destroy(staging);
  }
}

export async function runPrefill(
  ctx: GpuContext,
  c: ModelConfig,
  k: Kernels,
  w: GpuWeights,
  s: SessionBuffers,
  p: PrefillBuffers,
  audio: Float32Array,
  request: BackendRequest,
  returnLogits: boolean,
  /** Called once each layer has been submitted, before the next is encoded; its work is queued before the next layer's. */
  onLayer?: (layer: number) => Promise<void>,
  /**
   * Rows from `first` on have, per layer, their input (the residual stream entering it,
   * [rows, D]), queries and attention outputs ([rows, QD] each) copied out into `of(layer)`'s
   * buffers (the triage's).
   */
  taps?: { first: number; of: (layer: number) => { input: GPUBuffer; q: GPUBuffer; attn: GPUBuffer } },
): Promise<GpuPrefillOutput> {
  const A = s.sizes.audioLength;
  const n = s.sizes.promptLength;
  const D = c.hiddenSize;
  const I = c.intermediateSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const q = ctx.device.queue;
  const prompt = s.sizes.prompt;
  const a0 = audioStart(prompt);
  const ids = new Int32Array(n);
  ids.set(prompt.prefix);
  for (let i = 0; i < A; i++) ids[a0 + i] = -1 - i;
  prompt.instruction.forEach((t, i) => (ids[a0 + A + i] = t));
  q.writeBuffer(p.ids, 0, ids);
  // Audio rows go straight into the hidden states; the embedding pass writes only token rows.
  if (A > 0) q.writeBuffer(p.x, a0 * D * 4, audio.buffer, audio.byteOffset, A * D * 4);
  // Read-only uniforms of equal values are one buffer; the prefill buffers own them.
  const u = sharedUniforms(ctx, (b) => p.adopt(b));
  const firstQuery = Number.isFinite(request.prefillQueries) ? Math.max(0, n - request.prefillQueries) : 0;
  const iqRows = s.sizes.instructionQueryRows;
  const [iq0] = instructionRows(prompt, A);
  // Row blocks of `prefillChunk` rows. Offsets are multiples of 64 rows, which keeps every
  // sub-binding at a multiple of the 256-byte storage offset alignment.
  const C = s.sizes.prefillChunk;
  const blocks = Array.from({ length: Math.ceil(n / C) }, (_, b) => ({ r0: b * C, m: Math.min(C, n - b * C) }));
  const rowsOf = (buffer: GPUBuffer, width: number, r0: number, m: number, bytes = 4): GPUBufferBinding => ({
    buffer,
    offset: bytes * r0 * width,
    size: bytes * m * width,
  });
  const kvBytes = p.kvElementBytes;
  const run = (enc: GPUCommandEncoder, ...ds: Dispatch[]) => {
    for (const d of ds) {
      const pass = enc.beginComputePass();
      record(pass, d);
      pass.end();
    }
  };
  let enc = ctx.device.createCommandEncoder({ label: 'prefill embed' });
  // Ops of each matrix's weight format; the embedding table runs once per row part.
  const wk = w.kernels;
  run(enc, ...wk(w.embed.format).embed.run({ table: w.embed, ids: p.ids, x: p.x }, n, u));
  enc.clearBuffer(p.scores);
  for (let l = 0; l < c.numLayers; l++) {
    const L = w.layers[l];
    const { k: pk, v: pv } = p.kvOf(l);
    const tap = taps?.of(l);
    if (taps && tap) enc.copyBufferToBuffer(p.x, 4 * taps.first * D, tap.input, 0, 4 * (n - taps.first) * D);
    for (const { r0, m } of blocks) {
      const x = rowsOf(p.x, D, r0, m);
      const attnU = prefillAttentionUniform(u, {
        row0: r0,
        n: r0 + m,
        audioStart: a0,
        audioLength: A,
        firstQuery,
        layer: l,
      });
      run(
        enc,
        k.rmsnorm.run({ x, w: L.attnNorm, y: p.h }, { rows: m }, u),
        wk(L.qkv.format).matmul.run({ w: L.qkv, x: p.h, y: p.qkv }, m, u),
        k.ropeSplit.run(
          {
            qkv: p.qkv,
            q: p.q,
            k: rowsOf(pk, KVD, r0, m, kvBytes),
            v: rowsOf(pv, KVD, r0, m, kvBytes),
            rope: s.rope,
            bias: w.qkvBias(l),
          },
          { rows: m, pos0: r0 },
          u,
        ),
        k.causalAttention.run({ q: p.q, k: pk, v: pv, out: p.attn, ml: p.ml, params: attnU }, m),
      );
      // The instruction rows' queries, kept for summary slots fitted to them (the block's are overwritten by the next).
      const q0 = Math.max(r0, iq0);
      const q1 = Math.min(r0 + m, iq0 + iqRows);
      if (q1 > q0)
        enc.copyBufferToBuffer(
          p.q,
          4 * (q0 - r0) * QD,
          p.instructionQ,
          4 * (p.heldLayer(l) * iqRows + q0 - iq0) * QD,
          4 * (q1 - q0) * QD,
        );
      if (taps && tap && r0 + m > taps.first) {
        const t0 = Math.max(r0, taps.first);
        const bytes = 4 * (r0 + m - t0) * QD;
        enc.copyBufferToBuffer(p.q, 4 * (t0 - r0) * QD, tap.q, 4 * (t0 - taps.first) * QD, bytes);
        enc.copyBufferToBuffer(p.attn, 4 * (t0 - r0) * QD, tap.attn, 4 * (t0 - taps.first) * QD, bytes);
      }
      if (A > 0 && r0 + m > firstQuery)
        run(enc, k.prefillScores.run({ q: p.q, k: pk, scores: p.scores, ml: p.ml, params: attnU }, A));
      run(
        enc,
        wk(L.o.format).matmulAdd.run({ w: L.o, x: p.attn, y: x }, m, u),
        k.rmsnorm.run({ x, w: L.mlpNorm, y: p.h }, { rows: m }, u),
        wk(L.gateUp.format).matmul.run({ w: L.gateUp, x: p.h, y: p.gateUp }, m, u),
        k.swiglu.run({ gateUp: p.gateUp, act: p.act }, m, u),
        wk(L.down.format).matmulAdd.run({ w: L.down, x: p.act, y: x }, m, u),
      );
    }
    q.submit([enc.finish()]);
    if (onLayer) await onLayer(l);
    enc = ctx.device.createCommandEncoder({ label: `prefill layer ${l + 1}` });
  }
  // Only the last prompt row goes through the final norm and the LM head, whose matvec
  // runs one dispatch per row part, each writing its slice of the logits.
  run(
    enc,
    k.rmsnorm.run({ x: p.x, w: w.norm, y: s.h }, { rows: 1, inRow0: n - 1 }, u),
    ...wk(w.lmHead.format).matvec.run({ w: w.lmHead, x: s.h, y: s.logits }, u),
    k.argmax.run({ logits: s.logits, token: s.tokenOut }),
  );
  q.submit([enc.finish()]);
  const heads = kvHeadCount(c);
  // A per-layer prefill has read each layer's scores and keys as it went.
  const wantKeys = request.prefillKeys && !onLayer;
  const parts: [GPUBuffer, number][] = [
    [s.tokenOut, 4],
    [s.logits, returnLogits ? 4 * c.vocabSize : 0],
    [p.scores, onLayer ? 0 : 4 * heads * A],
  ];
  if (wantKeys) for (let l = 0; l < c.numLayers; l++) parts.push([p.k[l], p.kvElementBytes * n * KVD]);
  const got = await readBack(ctx, parts);
  const token = new Uint32Array(got[0])[0];
  const allScores = new Float32Array(got[2]);
  const scores = Array.from({ length: heads }, (_, h) => allScores.slice(h * A, (h + 1) * A));
  const keys = wantKeys
    ? Array.from({ length: c.numLayers }, (_, l) => layerKeys(c, kvValues(got[3 + l], p.kvElementBytes), A, a0)).flat()
    : undefined;
  return { token, logits: returnLogits ? new Float32Array(got[1]) : undefined, scores, keys };
}

/** Per KV head of one layer, its post-RoPE audio keys [A, headDim] from the layer's K [n, KVD], audio from row a0. */
function layerKeys(c: ModelConfig, kl: Float32Array, A: number, a0: number): Float32Array[] {
  const hd = c.headDim;
  const KVD = c.numKvHeads * hd;
  return Array.from({ length: c.numKvHeads }, (_, kh) => {
    const out = new Float32Array(A * hd);
    for (let a = 0; a < A; a++) out.set(kl.subarray((a0 + a) * KVD + kh * hd, (a0 + a) * KVD + (kh + 1) * hd), a * hd);
    return out;
  });
}

/**
 * What a per-layer prefill reads back once a layer has run: its heads' prefill scores,
 * their audio keys when the policy asked, and the layer's whole K/V when some head of it
 * keeps CPU copies (asked for separately, once the plan says so).
 */
export async function readLayerScores(
  ctx: GpuContext,
  c: ModelConfig,
  p: PrefillBuffers,
  layer: number,
  A: number,
  n: number,
  withKeys: boolean,
  a0: number,
): Promise<{ scores: Float32Array[]; keys?: Float32Array[] }> {
  const H = c.numKvHeads;
  const parts: [GPUBuffer, number, number][] = [[p.scores, 4 * H * A, 4 * layer * H * A]];
  if (withKeys) parts.push([p.kvOf(layer).k, p.kvElementBytes * n * H * c.headDim, 0]);
  const got = await readBack(ctx, parts);
  const all = new Float32Array(got[0]);
  return {
    scores: Array.from({ length: H }, (_, h) => all.slice(h * A, (h + 1) * A)),
    keys: withKeys ? layerKeys(c, kvValues(got[1], p.kvElementBytes), A, a0) : undefined,
  };
}

/** Whether placing a head reads its prefill rows on the CPU: for CPU copies, or to average them into summary slots. */
export function readsRows(h: HeadResidency): boolean {
  return h.cpu.length > 0 || (h.summaries?.length ?? 0) > 0;
}

/**
 * Reads back the prefill K and V of the given layers (for CPU copies and summaries): [n,
 * KVD] each as f32 (of f16 values for an f16 pool), and the instruction rows' queries
 * where the prefill kept them ([rows, QD]).
 */
export async function readPrefillKv(
  ctx: GpuContext,
  c: ModelConfig,
  p: PrefillBuffers,
  n: number,
  layers: number[],
  queryRows = 0,
): Promise<Map<number, { k: Float32Array; v: Float32Array; q: Float32Array }>> {
  const bytes = p.kvElementBytes * n * c.numKvHeads * c.headDim;
  const qBytes = 4 * queryRows * c.numHeads * c.headDim;
  const parts: [GPUBuffer, number, number?][] = [];
  for (const l of layers)
    parts.push([p.kvOf(l).k, bytes], [p.kvOf(l).v, bytes], [p.instructionQ, qBytes, p.heldLayer(l) * qBytes]);
  const got = parts.length ? await readBack(ctx, parts) : [];
  const out = new Map<number, { k: Float32Array; v: Float32Array; q: Float32Array }>();
  layers.forEach((l, i) =>
    out.set(l, {
      k: kvValues(got[3 * i], p.kvElementBytes),
      v: kvValues(got[3 * i + 1], p.kvElementBytes),
      q: new Float32Array(got[3 * i + 2]),
    }),
  );
  return out;
}

/** Where a layer's pool pages live: the pool, or during a per-layer prefill the shard just made for it. */
export type PoolTarget = Pick<GpuPool, 'kOf' | 'vOf' | 'baseSlot'>;

/** Copies the prefill rows the residency placed on the GPU into their pool slots. */
export function gatherIntoPool(
  ctx: GpuContext,
  c: ModelConfig,
  k: Kernels,
  pool: PoolTarget,
  p: PrefillBuffers,
  gathers: Gather[],
): void {
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
  const u = sharedUniforms(ctx, (b) => p.adopt(b));
  const enc = ctx.device.createCommandEncoder({ label: 'prefill gather' });
  const pass = enc.beginComputePass();
  perLayer.forEach((e, l) => {
    const count = e.length / 3;
    if (count === 0) return;
    const { k: srcK, v: srcV } = p.kvOf(l);
    record(
      pass,
      k.gather.run(
        { entries, srcK, srcV, kPool: pool.kOf(l), vPool: pool.vOf(l) },
        { first: firsts[l], count, base: pool.baseSlot(l) },
        u,
      ),
    );
  });
  pass.end();
  ctx.device.queue.submit([enc.finish()]);
}

/**
 * A whole prefill plan into the pool: kept rows gathered on the GPU, CPU copies read back
 * once (only the layers that keep any) and handed to the residency, then the page tables flushed.
 */
export async function placePlan(
  ctx: GpuContext,
  c: ModelConfig,
  k: Kernels,
  pool: GpuPool,
  p: PrefillBuffers,
  promptLength: number,
  residency: Residency,
  plan: PrefillPlan,
  text: number[],
  request: BackendRequest,
): Promise<TransferStats> {
  const cpuLayers = new Set<number>();
  plan.heads.forEach((h, i) => {
    if (readsRows(h)) cpuLayers.add(Math.floor(i / c.numKvHeads));
  });
  const kv = await readPrefillKv(ctx, c, p, promptLength, [...cpuLayers], p.instructionQueryRows);
  const hd = c.headDim;
  const kvd = c.numKvHeads * hd;
  const { gathers, transfer } = residency.applyPrefill(
    plan,
    text,
    (head, seqPos, kk, kOff, v, vOff) => {
      const src = kv.get(Math.floor(head / c.numKvHeads))!;
      const o = seqPos * kvd + (head % c.numKvHeads) * hd;
      kk.set(src.k.subarray(o, o + hd), kOff);
      v.set(src.v.subarray(o, o + hd), vOff);
    },
    summaryPlacement(c, plan.fitting, (l) => kv.get(l)!.q),
  );
  gatherIntoPool(ctx, c, k, pool, p, gathers);
  pool.flush(residency.pages);
  return transfer;
}
