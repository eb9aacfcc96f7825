/**
 * A KV pool split into shards (WebGPU: one K/V buffer pair per group of layers when the
 * pool exceeds one storage binding): the allocator keeps every head inside its shard,
 * the residency behaves exactly as unsharded, and the GPU pool layout is sized by the
 * plan, splits only when it must and never makes a buffer past the limit.
 */
import { describe, expect, it } from 'vitest';
import { PageAllocator } from '../../src/kv/page-allocator.js';
import { Residency, type PageStorage } from '../../src/kv/residency.js';
import { poolNeed } from '../../src/kv/sizing.js';
import { ContextTooLongError } from '../../src/errors.js';
import { kvHeadCount, segmentLength } from '../../src/model/config.js';
import { referenceConfig, rng } from '../../src/model/testing.js';
import { PREFILL_CHUNK_ROWS, prefillChunkRows, sessionSizes } from '../../src/backend/webgpu/session-buffers.js';
import { poolLayout } from '../../src/backend/webgpu/pool-layout.js';
import { slotBytes } from '../../src/kv/precision.js';

const noStorage: PageStorage = { writeRows() {}, syncPositions() {} };

describe('PageAllocator shards', () => {
  it('gives each head pages of its own shard only, and names the shard that is full', () => {
    const pool = new PageAllocator({
      heads: 4,
      pageSize: 10,
      numPages: 12,
      bytesPerPage: 100,
      shards: [
        { firstHead: 0, heads: 2, firstPage: 0, pages: 3 },
        { firstHead: 2, heads: 2, firstPage: 6, pages: 6 },
      ],
    });
    expect(pool.capacity).toBe(9);
    for (let i = 0; i < 3; i++) expect(pool.allocPage(i % 2)).toBeLessThan(3);
    expect(() => pool.allocPage(1)).toThrow(/shard 0 \(heads 0\.\.1\)/);
    expect(() => pool.allocPage(0)).toThrow(ContextTooLongError);
    for (let i = 0; i < 6; i++) {
      const p = pool.allocPage(2 + (i % 2));
      expect(p).toBeGreaterThanOrEqual(6);
      expect(p).toBeLessThan(12);
    }
    expect(pool.freePages).toBe(0);
    pool.freePage(0, pool.pageTable(0)[0]);
    expect(() => pool.allocPage(2)).toThrow(/shard 1/);
    expect(pool.allocPage(1)).toBeLessThan(3);
  });

  it('rejects shards that overlap, leave a head out or run past the pages', () => {
    const make = (shards: { firstHead: number; heads: number; firstPage: number; pages: number }[]) => () =>
      new PageAllocator({ heads: 4, pageSize: 10, numPages: 8, bytesPerPage: 100, shards });
    expect(
      make([
        { firstHead: 0, heads: 2, firstPage: 0, pages: 4 },
        { firstHead: 2, heads: 2, firstPage: 3, pages: 4 },
      ]),
    ).toThrow(/page 3/);
    expect(make([{ firstHead: 0, heads: 3, firstPage: 0, pages: 4 }])).toThrow(/head 3/);
    expect(
      make([
        { firstHead: 0, heads: 2, firstPage: 0, pages: 4 },
        { firstHead: 1, heads: 3, firstPage: 4, pages: 4 },
      ]),
    ).toThrow(/head 1/);
    expect(make([{ firstHead: 0, heads: 4, firstPage: 2, pages: 7 }])).toThrow(/pages outside/);
  });
});

describe('Residency on a sharded pool', () => {
  it('places, recalls and releases exactly as on one pool, each head inside its shard', () => {
    const heads = 8;
    const N = 3000;
    const P = 25;
    const rand = rng(11);
    const plan = {
      heads: Array.from({ length: heads }, (_, h) => {
        const gpu: number[] = [];
        const cpu: number[] = [];
        const share = 0.1 + 0.1 * h;
        for (let p = 0; p < N; p++) {
          const onGpu = rand() < share;
          if (onGpu) gpu.push(p);
          if (h % 2 === 0 || !onGpu) cpu.push(p);
        }
        return { gpu: Int32Array.from(gpu), cpu: Int32Array.from(cpu) };
      }),
    };
    const text = [0, N + 1];
    const need = poolNeed(plan, P, text.length + 20);
    const perShard = [0, 1, 2, 3].map((s) => need.perHead[2 * s] + need.perHead[2 * s + 1]);
    const stride = Math.max(...perShard) + 7; // gaps between shards, as a GPU pool has
    const shards = perShard.map((pages, s) => ({ firstHead: 2 * s, heads: 2, firstPage: s * stride, pages }));
    const sharded = new Residency(
      { heads, headDim: 4, pageSize: P, numPages: 3 * stride + perShard[3], shards, audioStart: 1, audioLength: N },
      noStorage,
    );
    const plain = new Residency(
      { heads, headDim: 4, pageSize: P, numPages: need.total, audioStart: 1, audioLength: N },
      noStorage,
    );
    const src = (_h: number, _s: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
      k[ko] = 1;
      v[vo] = 1;
    };
    for (const r of [sharded, plain]) r.applyPrefill(plan, text, src);
    const out = new Int32Array(heads);
    for (let step = 0; step < 40; step++) {
      const h = step % heads;
      const pick = (a: Int32Array) => Int32Array.from(a.filter(() => rand() < 0.08));
      const sp = {
        release: [{ head: h, positions: pick(plain.gpuPositions(h)) }],
        recall: [{ head: h, positions: pick(plan.heads[h].cpu) }],
      };
      for (const r of [sharded, plain]) {
        r.apply(sp);
        r.appendText(N + 2 + step, out);
      }
      const a = sharded.stats();
      const b = plain.stats();
      expect(Array.from(a.gpuPerHead)).toEqual(Array.from(b.gpuPerHead));
      expect(a.rGpu).toBe(b.rGpu);
      expect(a.gpuBytesInUse).toBe(b.gpuBytesInUse);
      // Plain checks collected into one assertion: thousands of expect() calls are slow.
      const bad: string[] = [];
      for (let hh = 0; hh < heads; hh++) {
        const s = shards[Math.floor(hh / 2)];
        for (const page of sharded.pageTable(hh)) {
          if (page < s.firstPage || page >= s.firstPage + s.pages)
            bad.push(`head ${hh}: page ${page} outside its shard`);
        }
        for (const p of sharded.gpuPositions(hh)) {
          if (sharded.positions[sharded.slotOf(hh, p)] !== 1 + p) bad.push(`head ${hh}: position ${p} misplaced`);
        }
      }
      expect(bad.slice(0, 5)).toEqual([]);
    }
    expect(sharded.stats().gpuBytesCapacity).toBe(plain.stats().gpuBytesCapacity);
  });
});

describe('GPU pool layout', () => {
  const c = referenceConfig();
  const P = segmentLength(c);
  const heads = kvHeadCount(c);
  const pageKBytes = P * c.headDim * 4;
  const text = 1 + c.instruction.length + 400;
  const planOf = (A: number, share: number, cpu: boolean) => {
    const all = Int32Array.from({ length: A }, (_, i) => i);
    const keep = all.filter((p) => (p * 7919) % 100 < share * 100);
    return { heads: Array.from({ length: heads }, () => ({ gpu: keep, cpu: cpu ? all : new Int32Array(0) })) };
  };
  const limits = (bytes: number) => ({ maxStorageBufferBindingSize: bytes, maxBufferSize: bytes });

  it('keeps one K/V pair while the pool fits one binding', () => {
    const need = poolNeed(planOf(2000, 1, false), P, text);
    const l = poolLayout(c, need.perHead, P, 2 ** 30);
    expect(l.shards).toEqual([{ firstLayer: 0, layers: c.numLayers, firstPage: 0, pages: need.total }]);
    expect(l.capacityPages).toBe(need.total);
  });

  it('packs whole layers into shards whose K pages fit the limit', () => {
    const need = poolNeed(planOf(20_000, 1, false), P, text);
    for (const divisor of [1.2, 2, 3.5]) {
      const limit = Math.ceil((need.total * pageKBytes) / divisor);
      const l = poolLayout(c, need.perHead, P, limit);
      expect(l.shards.length).toBeGreaterThanOrEqual(Math.ceil(divisor));
      let layer = 0;
      let page = 0;
      for (const sh of l.shards) {
        expect(sh.firstLayer).toBe(layer);
        expect(sh.firstPage).toBe(page);
        let pages = 0;
        for (let h = sh.firstLayer * c.numKvHeads; h < (sh.firstLayer + sh.layers) * c.numKvHeads; h++)
          pages += need.perHead[h];
        expect(sh.pages).toBe(pages);
        expect(sh.pages * pageKBytes).toBeLessThanOrEqual(limit);
        layer += sh.layers;
        page += sh.pages;
      }
      expect(layer).toBe(c.numLayers);
      expect(l.capacityPages).toBe(need.total);
    }
  });

  it('says which layer is too big when one layer alone exceeds the binding', () => {
    const need = poolNeed(planOf(20_000, 1, false), P, text);
    const layerK = (need.total / c.numLayers) * pageKBytes;
    expect(() => poolLayout(c, need.perHead, P, Math.floor(layerK * 0.9))).toThrow(ContextTooLongError);
    expect(() => poolLayout(c, need.perHead, P, Math.floor(layerK * 0.9))).toThrow(/layer 0 keeps/);
  });

  it('allocates what the plan keeps: a fifth of the audio is not the full cache', () => {
    const A = 20_000;
    const full = poolLayout(c, poolNeed(planOf(A, 1, false), P, text).perHead, P, 2 ** 30);
    const wnwLike = poolLayout(c, poolNeed(planOf(A, 0.2, true), P, text).perHead, P, 2 ** 30);
    // 20 % of the audio pages, plus the recall headroom and the text pages of every head.
    expect(wnwLike.bytes / full.bytes).toBeLessThan(0.3);
    expect(wnwLike.bytes / full.bytes).toBeGreaterThan(0.2);
    expect(
      sessionSizes(
        c,
        { audioLength: A, maxNewTokens: 400, request: { decodeHeads: [], prefillQueries: 6 }, layered: false },
        limits(2 ** 30),
      ).worstPoolPages,
    ).toBeGreaterThanOrEqual(poolNeed(planOf(A, 1, true), P, text).total);
  });

  it("an hour of audio at full cache fits WebGPU's default 128 MiB binding limit", () => {
    const hour = 3600 * c.audio.tokensPerSecond;
    const limit = 128 * 2 ** 20;
    const s = sessionSizes(
      c,
      { audioLength: hour, maxNewTokens: 400, request: { decodeHeads: [0, 9], prefillQueries: 6 }, layered: false },
      limits(limit),
    );
    expect(s.largestBuffer).toBeLessThanOrEqual(limit);
    const need = poolNeed(planOf(hour, 1, false), P, text);
    expect(need.total * pageKBytes).toBeGreaterThan(limit); // one K buffer would not do
    const l = poolLayout(c, need.perHead, P, limit);
    expect(l.shards.length).toBeGreaterThan(1);
    // The prefill runs in row blocks: the widest buffers left are one layer's K/V and the hidden states.
    expect(
      sessionSizes(
        c,
        { audioLength: hour, maxNewTokens: 400, request: { decodeHeads: [], prefillQueries: 6 }, layered: false },
        limits(64 * 2 ** 20),
      ).prefillChunk,
    ).toBeLessThan(hour);
    // Past them, the error names the buffer that does not fit.
    expect(() =>
      sessionSizes(
        c,
        { audioLength: hour, maxNewTokens: 400, request: { decodeHeads: [], prefillQueries: 6 }, layered: false },
        limits(32 * 2 ** 20),
      ),
    ).toThrow(/one layer's prefill K/);
  });

  it('runs the prefill projections in row blocks that fit the binding', () => {
    const QKV = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    const opts = (audioLength: number) => ({
      audioLength,
      maxNewTokens: 400,
      request: { decodeHeads: [], prefillQueries: 6 },
      layered: false,
    });
    const big = sessionSizes(c, opts(20_000), limits(2 ** 30));
    expect(big.prefillChunk).toBe(PREFILL_CHUNK_ROWS);
    const limit = 3 * 2 ** 20;
    expect(prefillChunkRows(QKV, limit) * QKV * 4).toBeLessThanOrEqual(limit);
    expect(prefillChunkRows(QKV, limit) % 64).toBe(0);
    // A short prompt is one block: its buffers are no larger than the prompt.
    expect(sessionSizes(c, opts(500), limits(2 ** 30)).prefillBytes).toBeLessThan(big.prefillBytes);
  });

  it('a KV budget too small for the text fails before any GPU work', () => {
    const opts = {
      audioLength: 1000,
      maxNewTokens: 400,
      request: { decodeHeads: [], prefillQueries: 6 },
      layered: false,
    };
    expect(() => sessionSizes(c, opts, limits(2 ** 30), heads * P * slotBytes(c.headDim))).toThrow(ContextTooLongError);
    expect(() => sessionSizes(c, opts, limits(2 ** 30), 100 * heads * P * slotBytes(c.headDim))).not.toThrow();
  });
});

describe('a pool grown layer by layer (per-layer prefill)', () => {
  it('places, recalls and releases as a pool placed at once, each layer in the shard added for it', () => {
    const heads = 6;
    const perLayer = 2;
    const N = 400;
    const P = 25;
    const rand = rng(5);
    const plan = {
      heads: Array.from({ length: heads }, (_, h) => {
        const gpu: number[] = [];
        const cpu: number[] = [];
        for (let p = 0; p < N; p++) {
          const onGpu = rand() < 0.15 + 0.1 * h;
          if (onGpu) gpu.push(p);
          else if (h % 3 !== 2) cpu.push(p);
        }
        return { gpu: Int32Array.from(gpu), cpu: Int32Array.from(cpu) };
      }),
    };
    const text = [0, N + 1];
    const need = poolNeed(plan, P, text.length + 10);
    const src = (h: number, s: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
      k[ko] = h;
      v[vo] = s;
    };
    const once = new Residency(
      { heads, headDim: 4, pageSize: P, numPages: need.total, audioStart: 1, audioLength: N },
      noStorage,
    );
    once.applyPrefill(plan, text, src);
    const synced: [number, number][] = [];
    const grown = new Residency(
      { heads, headDim: 4, pageSize: P, numPages: 0, shards: [], audioStart: 1, audioLength: N },
      noStorage,
    );
    expect(() => grown.pages.allocPage(0)).toThrow(/no pool shard/);
    const shards = [];
    for (let l = 0; l < heads / perLayer; l++) {
      const layer = plan.heads.slice(l * perLayer, (l + 1) * perLayer);
      const pages = poolNeed({ heads: layer }, P, text.length + 10).total;
      shards.push(grown.addShard(l * perLayer, perLayer, pages));
      grown.applyPrefillHeads(l * perLayer, layer, text, src);
    }
    expect(() => grown.addShard(0, 1, 3)).toThrow(/has pages already/);
    grown.attach({ writeRows() {}, syncPositions: (first, count) => synced.push([first, count]) });
    expect(synced).toEqual([[0, need.total * P]]);
    expect(grown.pages.capacity).toBe(need.total);
    const out = new Int32Array(heads);
    for (let step = 0; step < 20; step++) {
      const h = step % heads;
      const pick = (a: Int32Array) => Int32Array.from(a.filter(() => rand() < 0.2));
      const sp = {
        release: [{ head: h, positions: pick(once.gpuPositions(h)) }],
        recall: [{ head: h, positions: pick(plan.heads[h].cpu) }],
      };
      for (const r of [grown, once]) {
        r.apply(sp);
        r.appendText(N + 2 + step, out);
      }
      expect(grown.stats()).toEqual(once.stats());
      for (let hh = 0; hh < heads; hh++) {
        expect(Array.from(grown.gpuPositions(hh))).toEqual(Array.from(once.gpuPositions(hh)));
        const s = shards[Math.floor(hh / perLayer)];
        expect(grown.pageTable(hh).every((p) => p >= s.firstPage && p < s.firstPage + s.pages)).toBe(true);
      }
    }
  });
});
