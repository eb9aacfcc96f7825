/**
 * Per-session GPU memory: the KV pool (sized for the worst plan a policy may return),
 * the decode step's buffers, the readback ring, and the prefill buffers that live only
 * until applyPrefill. `sessionSizes` computes every size from the config and the session
 * options alone, so an impossible context fails with ContextTooLongError before any
 * GPU work.
 */
import { ContextTooLongError } from '../../errors.js';
import { groupSize, kvHeadCount, segmentLength, type ModelConfig } from '../../model/config.js';
import { RECALL_PAGES_PER_HEAD } from '../../kv/sizing.js';
import type { SessionOptions } from '../types.js';
import type { GpuContext } from './device.js';
import { GpuPool, NO_EXPORT, slotBytes } from './pool.js';
import { pagesPerSplit, ropeTable } from './kernels.js';

export interface SessionSizes {
  audioLength: number;
  /** Prompt length n = 1 + audio + instruction. */
  promptLength: number;
  /** Text tokens per head: bos, instruction, generated. */
  textTokens: number;
  pageSize: number;
  /** Pool pages: shards x shardPages. */
  capacityPages: number;
  /** K (and V) buffers of the pool, each holding the pages of layersPerShard consecutive layers. */
  shards: number;
  layersPerShard: number;
  shardPages: number;
  maxSplits: number;
  exported: number;
  /** Rows per block of the prefill's QKV projection and MLP (a multiple of 64). */
  prefillChunk: number;
  /** Bytes per prefill buffer, the largest single buffer, and the totals. */
  prefillBytes: number;
  largestBuffer: number;
  poolBytes: number;
  decodeBytes: number;
  readbackBytes: number;
}

export function sessionSizes(c: ModelConfig, opts: SessionOptions, limits: { maxStorageBufferBindingSize: number; maxBufferSize: number }, kvBudgetBytes?: number): SessionSizes {
  const A = opts.audioLength;
  const n = 1 + A + c.instruction.length;
  const P = segmentLength(c);
  const heads = kvHeadCount(c);
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const G = groupSize(c);
  const textTokens = 1 + c.instruction.length + opts.maxNewTokens;
  // Upper bound of kv/sizing.ts poolNeed over all plans: per head, ceil(gpu/P) + ceil(cpuOnly/P)
  // <= ceil(A/P) + 1 (gpu and cpuOnly are disjoint), plus recall headroom <= min(ceil(A/P), cap).
  const worst = heads * (Math.ceil(A / P) + 1 + Math.min(Math.ceil(A / P), RECALL_PAGES_PER_HEAD) + Math.ceil(textTokens / P));
  const bytesPerPage = P * slotBytes(c.headDim);
  const limit = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const wanted = kvBudgetBytes === undefined ? worst : Math.min(worst, Math.floor(kvBudgetBytes / bytesPerPage));
  const { shards, layersPerShard, shardPages } = shardLayout(c, wanted, P, limit);
  const capacityPages = shards * shardPages;
  const PPS = pagesPerSplit(P);
  const maxSplits = Math.max(1, Math.ceil(capacityPages / PPS));
  const exported = opts.request.decodeHeads.length;
  const prefillChunk = prefillChunkRows(Math.max(QD + 2 * KVD, 2 * I), limit);
  const m = Math.min(n, prefillChunk);
  // [what, floats] of every buffer whose size grows with the recording (PrefillBuffers, the pool).
  const prefill: [string, number][] = [
    ['prompt hidden states', n * D], ['prompt normed states', n * D], ['QKV block', m * (QD + 2 * KVD)],
    ['prompt queries', n * QD], ['prompt attention output', n * QD], ['gate/up block', m * 2 * I], ['SwiGLU block', m * I],
    ['softmax statistics', n * c.numHeads * 2], ['prompt ids', n], ['audio embeddings', A * D], ['prefill scores', heads * A],
  ];
  const perLayerKv = n * KVD;
  const prefillBytes = 4 * (prefill.reduce((a, [, f]) => a + f, 0) + 2 * c.numLayers * perLayerKv);
  const grown: [string, number][] = [...prefill, ["one layer's prefill K", perLayerKv], ['K pages of one pool shard', shardPages * P * c.headDim],
    ['decode attention scores', capacityPages * P * G]];
  const [largestWhat, largestFloats] = grown.reduce((a, b) => (b[1] > a[1] ? b : a));
  const largestBuffer = 4 * largestFloats;
  const readbackBytes = 16 + 4 * (opts.returnLogits ? c.vocabSize : 0) + 4 * exported * A + 4 * (opts.request.decodeQueries ? exported * G * c.headDim : 0);
  const decodeBytes = 4 * (2 * D + 2 * QD + I + c.vocabSize + maxSplits * c.numHeads * (c.headDim + 2) + capacityPages * P * G + c.numLayers * c.numHeads * 2 + exported * A + exported * G * c.headDim + (n + opts.maxNewTokens) * c.headDim) + 2 * readbackBytes;
  const poolBytes = GpuPool.bytes(capacityPages, P, c.headDim, heads);
  const total = prefillBytes + poolBytes + decodeBytes;
  const shardHeads = layersPerShard * c.numKvHeads;
  const textPages = shardHeads * Math.ceil(textTokens / P);
  if (kvBudgetBytes !== undefined && shardPages < textPages + shardHeads) {
    const where = shards > 1 ? ` per shard of ${layersPerShard} layers` : '';
    throw new ContextTooLongError(worst * bytesPerPage, kvBudgetBytes, `${A} audio tokens: the KV budget holds ${shardPages} pages${where}, not even the text's ${textPages} plus one audio page per head`);
  }
  if (largestBuffer > limit) {
    throw new ContextTooLongError(total, limit, `${A} audio tokens need a ${(largestBuffer / 2 ** 20).toFixed(1)} MiB GPU buffer (${largestWhat}), over this device's binding limit`);
  }
  if (n > 65535) throw new ContextTooLongError(total, limit, `a prompt of ${n} positions exceeds the 65,535 rows one prefill dispatch covers`);
  return { audioLength: A, promptLength: n, textTokens, pageSize: P, capacityPages, shards, layersPerShard, shardPages, maxSplits, prefillChunk, exported, prefillBytes, largestBuffer, poolBytes, decodeBytes, readbackBytes };
}

/** Most rows one prefill block takes: PREFILL_CHUNK_ROWS, fewer when a block of `width` floats per row would pass `limit`. */
export function prefillChunkRows(width: number, limit: number): number {
  return Math.max(64, Math.min(PREFILL_CHUNK_ROWS, Math.floor(limit / (4 * width) / 64) * 64));
}

/** Rows per prefill block by default: large enough that blocks cost nothing, small enough to bound their memory. */
export const PREFILL_CHUNK_ROWS = 4096;

/**
 * Splits `pages` (spread evenly over the layers, as every plan's worst case is) into
 * shards of whole layers whose K pages fit one storage binding: one shard when all fit.
 * A layer too big for a binding alone gets a shard of its own, which sessionSizes then
 * reports as over the limit.
 */
export function shardLayout(c: ModelConfig, pages: number, pageSize: number, limit: number): { shards: number; layersPerShard: number; shardPages: number } {
  const pageBytes = pageSize * c.headDim * 4;
  if (pages * pageBytes <= limit) return { shards: 1, layersPerShard: c.numLayers, shardPages: pages };
  // floor: a budget-capped pool never grows past its budget by rounding.
  const layerPages = Math.max(1, Math.floor(pages / c.numLayers));
  const layersPerShard = Math.max(1, Math.floor(limit / (layerPages * pageBytes)));
  return { shards: Math.ceil(c.numLayers / layersPerShard), layersPerShard, shardPages: layerPages * layersPerShard };
}

/** Buffers of the decode step, the pool and the readback ring: created once per session. */
export class SessionBuffers {
  readonly pool: GpuPool;
  readonly x: GPUBuffer;
  readonly h: GPUBuffer;
  readonly q: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly act: GPUBuffer;
  readonly logits: GPUBuffer;
  readonly tokenIn: GPUBuffer;
  readonly tokenOut: GPUBuffer;
  readonly step: GPUBuffer;
  readonly partials: GPUBuffer;
  readonly scores: GPUBuffer;
  readonly ml: GPUBuffer;
  readonly exportW: GPUBuffer;
  readonly exportQ: GPUBuffer;
  readonly rope: GPUBuffer;
  readonly ring: GPUBuffer[];
  readonly exportIndex: Uint32Array;
  private readonly all: GPUBuffer[] = [];

  constructor(private readonly ctx: GpuContext, c: ModelConfig, opts: SessionOptions, readonly sizes: SessionSizes) {
    const heads = kvHeadCount(c);
    const D = c.hiddenSize;
    const QD = c.numHeads * c.headDim;
    const G = groupSize(c);
    const R = sizes.exported;
    const A = sizes.audioLength;
    this.exportIndex = new Uint32Array(heads).fill(NO_EXPORT);
    opts.request.decodeHeads.forEach((h, i) => {
      if (h < 0 || h >= heads) throw new RangeError(`decode head ${h} outside 0..${heads - 1}`);
      this.exportIndex[h] = i;
    });
    this.pool = new GpuPool(ctx, sizes, c.headDim, c.numKvHeads, this.exportIndex);
    const b = (label: string, floats: number) => {
      const buf = ctx.buffer(label, Math.max(1, floats) * 4);
      this.all.push(buf);
      return buf;
    };
    this.x = b('x', D);
    this.h = b('h', D);
    this.q = b('q', QD);
    this.attn = b('attn', QD);
    this.act = b('act', c.intermediateSize);
    this.logits = b('logits', c.vocabSize);
    this.tokenIn = b('token.in', 1);
    this.tokenOut = b('token.out', 1);
    this.step = b('step', 4 + heads);
    this.partials = b('attn.partials', sizes.maxSplits * c.numHeads * (c.headDim + 2));
    this.scores = b('attn.scores', sizes.capacityPages * sizes.pageSize * G);
    this.ml = b('attn.ml', c.numLayers * c.numHeads * 2);
    this.exportW = b('export.weights', R * A);
    this.exportQ = b('export.queries', R * G * c.headDim);
    const positions = sizes.promptLength + opts.maxNewTokens;
    this.rope = ctx.buffer('rope', positions * c.headDim * 4, undefined, ropeTable(c, positions));
    this.all.push(this.rope);
    // Two staging buffers: one can be mapped while the next step's copy targets the other.
    this.ring = [0, 1].map((i) => {
      const r = ctx.buffer(`readback.${i}`, sizes.readbackBytes, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      this.all.push(r);
      return r;
    });
  }

  destroy(): void {
    this.pool.destroy();
    for (const b of this.all) this.ctx.destroy(b);
    this.all.length = 0;
  }
}

/** Buffers that hold the whole prompt: freed once applyPrefill has gathered the pool. */
export class PrefillBuffers {
  readonly x: GPUBuffer;
  readonly h: GPUBuffer;
  readonly qkv: GPUBuffer;
  readonly q: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly gateUp: GPUBuffer;
  readonly act: GPUBuffer;
  readonly ml: GPUBuffer;
  readonly ids: GPUBuffer;
  readonly audio: GPUBuffer;
  readonly scores: GPUBuffer;
  readonly k: GPUBuffer[] = [];
  readonly v: GPUBuffer[] = [];
  private readonly all: GPUBuffer[] = [];

  constructor(private readonly ctx: GpuContext, c: ModelConfig, sizes: SessionSizes) {
    const n = sizes.promptLength;
    const A = sizes.audioLength;
    const QD = c.numHeads * c.headDim;
    const KVD = c.numKvHeads * c.headDim;
    const b = (label: string, floats: number) => {
      const buf = ctx.buffer(`prefill.${label}`, Math.max(1, floats) * 4);
      this.all.push(buf);
      return buf;
    };
    this.x = b('x', n * c.hiddenSize);
    this.h = b('h', n * c.hiddenSize);
    const m = Math.min(n, sizes.prefillChunk);
    this.qkv = b('qkv', m * (QD + 2 * KVD));
    this.q = b('q', n * QD);
    this.attn = b('attn', n * QD);
    this.gateUp = b('gate_up', m * 2 * c.intermediateSize);
    this.act = b('act', m * c.intermediateSize);
    this.ml = b('ml', n * c.numHeads * 2);
    this.ids = b('ids', n);
    this.audio = b('audio', A * c.hiddenSize);
    this.scores = b('scores', kvHeadCount(c) * A);
    for (let l = 0; l < c.numLayers; l++) {
      this.k.push(b(`k.${l}`, n * KVD));
      this.v.push(b(`v.${l}`, n * KVD));
    }
  }

  /** Extra buffers made during prefill (uniforms, gather lists) die with these. */
  adopt(buf: GPUBuffer): GPUBuffer {
    this.all.push(buf);
    return buf;
  }

  destroy(): void {
    for (const b of this.all) this.ctx.destroy(b);
    this.all.length = 0;
  }
}
