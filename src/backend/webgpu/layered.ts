/**
 * Per-layer KV placement on the GPU (WebGpuBackend.prefillByLayer): once a layer's rows
 * have run, its scores (and keys) are read back, the policy answers that layer's heads,
 * the layer's pool pages are allocated as a shard of their own, CPU copies are read
 * back, and the kept rows are gathered into the shard before the next layer overwrites
 * the prefill K/V buffers. The pool's positions and tables come once every layer's
 * pages are known.
 */
import { audioStart, kvHeadCount, type ModelConfig } from '../../model/config.js';
import { Residency, type PageStorage } from '../../kv/residency.js';
import { checkPoolLimit, poolNeed } from '../../kv/sizing.js';
import { slotBytes } from '../../kv/precision.js';
import type { LayerPrefill } from '../../kv/plan.js';
import type { BackendRequest } from '../readouts.js';
import { policyLayout, summaryPlacement, textPositions } from '../../kv/prompt.js';
import type { GpuContext } from '../../gpu/device.js';
import type { Kernels } from './kernels.js';
import { layerShardPages, type PoolShardLayout } from './pool-layout.js';
import { gatherIntoPool, readLayerScores, readPrefillKv, readsRows } from './prefill.js';
import { writeKvRows } from './pool.js';
import type { PrefillBuffers, SessionSizes } from './session-buffers.js';

export interface LayerPlacerDeps {
  ctx: GpuContext;
  config: ModelConfig;
  kernels: Kernels;
  prefill: PrefillBuffers;
  sizes: SessionSizes;
  request: BackendRequest;
  run: LayerPrefill;
  elementBytes: number;
  /** Bytes one binding may hold; the KV pool's byte cap (kvMaxBytes), if any. */
  limit: number;
  maxBytes?: number;
  /** How the pool grows once decoding generates text (ResidencyShape.growPages, maxPages). */
  growth: { growPages: number; maxPages?: number };
  /** Makes buffers inside the backend's error scopes: `failure` resolves to an out-of-memory error, or null. */
  scoped<T>(make: () => T, what: string, bytes: number): { value: T; failure: Promise<Error | null> };
}

/**
 * Kept rows are placed by gathers on the GPU as layers complete; what the residency writes
 * itself (summary slots) goes into the shard being placed. Positions wait for the pool.
 */
class ShardStorage implements PageStorage {
  /** The shard being placed: its buffers and first pool-wide slot. */
  current?: { k: GPUBuffer; v: GPUBuffer; base: number };
  private half = new Uint16Array(0);
  constructor(
    private readonly queue: GPUQueue,
    private readonly headDim: number,
    private readonly elementBytes: number,
  ) {}
  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    const s = this.current;
    if (!s) throw new Error('KV rows written before a shard exists');
    this.half = writeKvRows(
      this.queue,
      s,
      slot - s.base,
      count * this.headDim,
      this.headDim,
      this.elementBytes,
      k,
      v,
      this.half,
    );
  }
  syncPositions(): void {}
}

export class LayerPlacer {
  readonly residency: Residency;
  /** One shard per layer, in layer order, and its K/V buffers. */
  readonly shards: PoolShardLayout[] = [];
  readonly shardBuffers: { k: GPUBuffer; v: GPUBuffer }[] = [];
  bytesToCpu = 0;
  private readonly storage: ShardStorage;

  constructor(private readonly d: LayerPlacerDeps) {
    const c = d.config;
    this.storage = new ShardStorage(d.ctx.device.queue, c.headDim, d.elementBytes);
    this.residency = new Residency(
      {
        heads: kvHeadCount(c),
        headDim: c.headDim,
        pageSize: d.sizes.pageSize,
        numPages: 0,
        shards: [],
        kvElementBytes: d.elementBytes,
        audioStart: audioStart(d.sizes.prompt),
        audioLength: d.sizes.audioLength,
        ...d.growth,
      },
      this.storage,
    );
  }

  /** Places layer `l`; runs after the layer's commands were submitted and before the next layer's are. */
  async place(l: number): Promise<void> {
    const { ctx, config: c, sizes, prefill: p } = this.d;
    const A = sizes.audioLength;
    const n = sizes.promptLength;
    const P = sizes.pageSize;
    const H = c.numKvHeads;
    const hd = c.headDim;
    const got = await readLayerScores(ctx, c, p, l, A, n, !!this.d.request.prefillKeys, audioStart(sizes.prompt));
    const heads = this.d.run.layer({
      layout: policyLayout(c, A, sizes.prompt),
      layer: l,
      scores: got.scores,
      keys: got.keys,
    });
    // The prompt's text only: generated tokens' pages come as they are generated.
    const pages = layerShardPages(
      c,
      l,
      poolNeed({ heads }, P, sizes.textTokens).perHead,
      P,
      this.d.limit,
      this.d.elementBytes,
    );
    const total = (this.residency.pages.numPages + pages) * P * slotBytes(hd, this.d.elementBytes);
    checkPoolLimit(total, this.d.maxBytes, `${A} audio tokens under this plan (at layer ${l})`);
    const shard = this.residency.addShard(l * H, H, pages);
    this.shards.push({ firstLayer: l, layers: 1, firstPage: shard.firstPage, pages });
    const bytes = Math.max(1, pages) * P * hd * this.d.elementBytes;
    const { value: buf, failure } = this.d.scoped(
      () => ({ k: ctx.buffer(`kv.k.${l}`, bytes), v: ctx.buffer(`kv.v.${l}`, bytes) }),
      `layer ${l}'s KV pages (${pages} pages)`,
      2 * bytes,
    );
    this.shardBuffers.push(buf);
    const oom = await failure;
    if (oom) throw oom;
    // CPU copies and summaries: this layer's K/V read back once, only when some head has any.
    const kv = heads.some(readsRows) ? (await readPrefillKv(ctx, c, p, n, [l], p.instructionQueryRows)).get(l)! : null;
    const base = shard.firstPage * P;
    this.storage.current = { ...buf, base };
    const placed = this.residency.applyPrefillHeads(
      l * H,
      heads,
      textPositions(sizes.prompt, A),
      (head, seqPos, k, kOff, v, vOff) => {
        const o = seqPos * H * hd + (head % H) * hd;
        k.set(kv!.k.subarray(o, o + hd), kOff);
        v.set(kv!.v.subarray(o, o + hd), vOff);
      },
      summaryPlacement(c, this.d.run.fitting, () => kv!.q),
    );
    this.bytesToCpu += placed.transfer.bytesToCpu;
    // Queued before the next layer, which then overwrites the prefill K/V this reads.
    gatherIntoPool(
      ctx,
      c,
      this.d.kernels,
      { kOf: () => buf.k, vOf: () => buf.v, baseSlot: () => base },
      p,
      placed.gathers,
    );
  }

  /** Frees the shards made so far (a failed prefill; once a pool owns them, the pool frees them). */
  destroy(): void {
    for (const b of this.shardBuffers) {
      this.d.ctx.destroy(b.k);
      this.d.ctx.destroy(b.v);
    }
  }
}
