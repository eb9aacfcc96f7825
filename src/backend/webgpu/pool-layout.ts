/**
 * The shape of a session's KV pool on the GPU, decided at placement from the plan's
 * pages (kv/sizing.ts poolNeed), so a policy that keeps a fifth of the audio allocates
 * about a fifth of the full cache's pool, not the worst case.
 *
 * Shards: one buffer can be bound only up to maxStorageBufferBindingSize, so the pages
 * are grouped by consecutive layers into shards whose K pages fit one binding (one shard
 * when the whole pool does). Each shard has its own K and V buffer; page ids stay
 * pool-wide (shard s holds pages [firstPage, firstPage + pages)), and the Residency
 * gives a layer's heads pages of its shard only.
 */
import { ContextTooLongError } from '../../errors.js';
import { audioStart, groupSize, kvHeadCount, type ModelConfig, type PromptIds } from '../../model/config.js';
import type { PoolShard } from '../../kv/page-allocator.js';
import type { ResidencyShape } from '../../kv/residency.js';
import { slotBytes } from '../../kv/precision.js';
import { pagesPerSplit } from './kernels.js';
import { tableEntries } from './page-tables.js';

export interface PoolShardLayout {
  firstLayer: number;
  layers: number;
  firstPage: number;
  pages: number;
}

export interface PoolLayout {
  pageSize: number;
  /** Bytes of one stored key or value element: 4 (f32) or 2 (f16, two per u32 word). */
  elementBytes: number;
  capacityPages: number;
  shards: PoolShardLayout[];
  /** Split-K workgroups per KV head at most: a head's table never outgrows its shard. */
  maxSplits: number;
  /** Every byte the pool allocates: K/V pages, positions, tables, decode scores and partials. */
  bytes: number;
}

/**
 * The pool for `perHead` pages per flat KV head (layer-major), packed greedily into
 * shards of whole layers under `limit` bytes per K buffer, each head counted with
 * `growth` more pages (what the text may still add), so a shard grows without passing a
 * binding. Throws ContextTooLongError, naming the buffer, when one layer's pages or a
 * pool-wide buffer cannot fit a binding.
 */
export function poolLayout(
  c: ModelConfig,
  perHead: ArrayLike<number>,
  pageSize: number,
  limit: number,
  elementBytes = 4,
  growth = 0,
): PoolLayout {
  const HKV = c.numKvHeads;
  const pageKBytes = pageSize * c.headDim * elementBytes;
  const shards: PoolShardLayout[] = [];
  let cur: PoolShardLayout = { firstLayer: 0, layers: 0, firstPage: 0, pages: 0 };
  for (let l = 0; l < c.numLayers; l++) {
    let pages = 0;
    for (let h = l * HKV; h < (l + 1) * HKV; h++) pages += perHead[h];
    if (pages * pageKBytes > limit) {
      throw new ContextTooLongError(
        pages * pageKBytes,
        limit,
        `layer ${l} keeps ${pages} KV pages under this plan, ` +
          `whose ${((pages * pageKBytes) / 2 ** 20).toFixed(1)} MiB of keys exceed this device's binding limit`,
        'pool-binding',
      );
    }
    const grown = (cur.layers + 1) * HKV * growth;
    if (cur.layers > 0 && (cur.pages + pages + grown) * pageKBytes > limit) {
      shards.push(cur);
      cur = { firstLayer: l, layers: 0, firstPage: cur.firstPage + cur.pages, pages: 0 };
    }
    cur.layers++;
    cur.pages += pages;
  }
  shards.push(cur);
  return shardedLayout(c, shards, pageSize, limit, elementBytes);
}

/**
 * The pages one layer needs, checked against one binding: a per-layer prefill makes
 * each layer's shard as soon as that layer's plan is known.
 */
export function layerShardPages(
  c: ModelConfig,
  layer: number,
  perHead: ArrayLike<number>,
  pageSize: number,
  limit: number,
  elementBytes = 4,
): number {
  let pages = 0;
  for (let i = 0; i < perHead.length; i++) pages += perHead[i];
  const bytes = pages * pageSize * c.headDim * elementBytes;
  if (bytes > limit) {
    throw new ContextTooLongError(
      bytes,
      limit,
      `layer ${layer} keeps ${pages} KV pages under this plan, whose ${(bytes / 2 ** 20).toFixed(1)} MiB of keys exceed this device's binding limit`,
      'pool-binding',
    );
  }
  return pages;
}

/** The layout a per-layer prefill makes (one shard per layer, LayerPlacer), each layer's pages checked against one binding. */
export function layerLayout(
  c: ModelConfig,
  perHead: ArrayLike<number>,
  pageSize: number,
  limit: number,
  elementBytes = 4,
): PoolLayout {
  const HKV = c.numKvHeads;
  const shards: PoolShardLayout[] = [];
  let first = 0;
  for (let l = 0; l < c.numLayers; l++) {
    const pages = layerShardPages(
      c,
      l,
      Array.from(perHead).slice(l * HKV, (l + 1) * HKV),
      pageSize,
      limit,
      elementBytes,
    );
    shards.push({ firstLayer: l, layers: 1, firstPage: first, pages });
    first += pages;
  }
  return shardedLayout(c, shards, pageSize, limit, elementBytes);
}

/** The layout of given shards (consecutive pages, whole layers): the pool-wide buffers sized and checked. */
export function shardedLayout(
  c: ModelConfig,
  shards: PoolShardLayout[],
  pageSize: number,
  limit: number,
  elementBytes = 4,
): PoolLayout {
  const HKV = c.numKvHeads;
  const last = shards[shards.length - 1];
  const capacityPages = last.firstPage + last.pages;
  const slots = capacityPages * pageSize;
  const heads = c.numLayers * HKV;
  const maxSplits = Math.max(1, Math.ceil(Math.max(...shards.map((s) => s.pages)) / pagesPerSplit(pageSize)));
  const scores = slots * groupSize(c) * 4;
  const tables = tableEntries(heads, capacityPages) * 4;
  const partials = maxSplits * c.numHeads * (c.headDim + 2) * 4;
  for (const [what, bytes] of [
    ['decode attention scores', scores],
    ['slot positions', slots * 4],
    ['page tables', tables],
    ['split-K partials', partials],
  ] as const) {
    if (bytes > limit)
      throw new ContextTooLongError(
        bytes,
        limit,
        `the KV pool's ${what} (${(bytes / 2 ** 20).toFixed(1)} MiB) exceed this device's binding limit`,
        'pool-binding',
      );
  }
  return {
    pageSize,
    elementBytes,
    capacityPages,
    shards,
    maxSplits,
    bytes: slots * slotBytes(c.headDim, elementBytes) + scores + tables + partials,
  };
}

/** The Residency's shards for a layout: layer ranges become flat-head ranges. */
export function residencyShards(c: ModelConfig, layout: PoolLayout): PoolShard[] {
  return layout.shards.map((s) => ({
    firstHead: s.firstLayer * c.numKvHeads,
    heads: s.layers * c.numKvHeads,
    firstPage: s.firstPage,
    pages: s.pages,
  }));
}

/** The Residency over a pool of `layout` for a prompt around `audioLength` audio positions, growing as `growth` says. */
export function residencyShape(
  c: ModelConfig,
  layout: PoolLayout,
  prompt: PromptIds,
  audioLength: number,
  growth: { growPages: number; maxPages?: number },
): ResidencyShape {
  return {
    heads: kvHeadCount(c),
    headDim: c.headDim,
    pageSize: layout.pageSize,
    numPages: layout.capacityPages,
    shards: residencyShards(c, layout),
    kvElementBytes: layout.elementBytes,
    audioStart: audioStart(prompt),
    audioLength,
    ...growth,
  };
}

/**
 * Bytes of each of the two upload buffers, and of the landing buffer, of a decode step's KV
 * writes (step-writes.ts), its index table included: a
 * sixteenth of the pool, between 1 MiB and 16 MiB (a step recalling more writes the rest
 * directly, a `writeBuffer` per run of rows). 16 MiB holds 16,384 recalled positions of f32 K and V at
 * head_dim 128: WnW at 0.2 over 30 minutes of Voxtral recalls up to about 5,000 a step
 * (the host bench), past the 4 MiB this once was; 1 MiB holds the few hundred a step it
 * recalls over a short clip, past the 64 KiB this once was.
 */
export function stagingBytes(poolBytes: number): number {
  return Math.min(16 * 2 ** 20, Math.max(2 ** 20, Math.ceil(poolBytes / 16 / 4) * 4));
}
