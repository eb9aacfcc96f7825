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
  capacityPages: number;
  maxSplits: number;
  exported: number;
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
  const capacityPages = kvBudgetBytes === undefined ? worst : Math.min(worst, Math.floor(kvBudgetBytes / bytesPerPage));
  const PPS = pagesPerSplit(P);
  const maxSplits = Math.max(1, Math.ceil(capacityPages / PPS));
  const exported = opts.request.decodeHeads.length;
  const prefill = [n * D, n * D, n * (QD + 2 * KVD), n * QD, n * QD, n * 2 * I, n * I, n * c.numHeads * 2, n, A * D, heads * A];
  const perLayerKv = n * KVD;
  const prefillBytes = 4 * (prefill.reduce((a, b) => a + b, 0) + 2 * c.numLayers * perLayerKv);
  const kvBytes = capacityPages * P * c.headDim * 4;
  const largestBuffer = 4 * Math.max(...prefill, perLayerKv) > kvBytes ? 4 * Math.max(...prefill, perLayerKv) : kvBytes;
  const readbackBytes = 16 + 4 * (opts.returnLogits ? c.vocabSize : 0) + 4 * exported * A + 4 * (opts.request.decodeQueries ? exported * G * c.headDim : 0);
  const decodeBytes = 4 * (2 * D + 2 * QD + I + c.vocabSize + maxSplits * c.numHeads * (c.headDim + 2) + capacityPages * P * G + c.numLayers * c.numHeads * 2 + exported * A + exported * G * c.headDim + (n + opts.maxNewTokens) * c.headDim) + 2 * readbackBytes;
  const poolBytes = GpuPool.bytes(capacityPages, P, c.headDim, heads);
  const limit = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const total = prefillBytes + poolBytes + decodeBytes;
  const textPages = heads * Math.ceil(textTokens / P);
  if (kvBudgetBytes !== undefined && capacityPages < textPages + heads) {
    throw new ContextTooLongError(worst * bytesPerPage, kvBudgetBytes, `${A} audio tokens: the KV budget holds ${capacityPages} pages, not even the text's ${textPages} plus one audio page per head`);
  }
  if (largestBuffer > limit) {
    throw new ContextTooLongError(total, limit, `${A} audio tokens need a ${(largestBuffer / 2 ** 20).toFixed(1)} MiB GPU buffer, over this device's binding limit`);
  }
  if (n > 65535) throw new ContextTooLongError(total, limit, `a prompt of ${n} positions exceeds the 65,535 rows one prefill dispatch covers`);
  return { audioLength: A, promptLength: n, textTokens, pageSize: P, capacityPages, maxSplits, exported, prefillBytes, largestBuffer, poolBytes, decodeBytes, readbackBytes };
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
    this.pool = new GpuPool(ctx, sizes.capacityPages, sizes.pageSize, c.headDim, heads, this.exportIndex);
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
    this.qkv = b('qkv', n * (QD + 2 * KVD));
    this.q = b('q', n * QD);
    this.attn = b('attn', n * QD);
    this.gateUp = b('gate_up', n * 2 * c.intermediateSize);
    this.act = b('act', n * c.intermediateSize);
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
