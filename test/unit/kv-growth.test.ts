/**
 * Text KV on demand: a pool sized for the prompt grows as tokens are generated, shard by
 * shard, and every slot the residency holds moves with its shard's new page ids.
 */
import { describe, expect, it } from 'vitest';
import { EMPTY, Residency, type PageStorage } from '../../src/kv/residency.js';
import type { PoolShard } from '../../src/kv/page-allocator.js';
import { ContextTooLongError } from '../../src/errors.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import type { CpuDecodeSession } from '../../src/backend/cpu/decode-session.js';
import { createPolicy } from '../../src/policy/registry.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { kvHeadCount } from '../../src/model/config.js';
import { denseLogits } from '../helpers/dense-logits.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import type { LayerPrefill } from '../../src/kv/plan.js';

const hd = 2;
const P = 5;

/** K rows by pool-wide slot; growth moves each shard's rows to its new first slot, as the backends' storage does. */
class MovingStorage implements PageStorage {
  k = new Float32Array(0);
  grown = 0;
  constructor(slots: number) {
    this.k = new Float32Array(slots * hd);
  }
  writeRows(slot: number, count: number, k: Float32Array, _v: Float32Array): void {
    this.k.set(k.subarray(0, count * hd), slot * hd);
  }
  syncPositions(): void {}
  grow(from: readonly PoolShard[], to: readonly PoolShard[]): void {
    const last = to[to.length - 1];
    const k = new Float32Array((last.firstPage + last.pages) * P * hd);
    from.forEach((s, i) =>
      k.set(this.k.subarray(s.firstPage * P * hd, (s.firstPage + s.pages) * P * hd), to[i].firstPage * P * hd),
    );
    this.k = k;
    this.grown++;
  }
}

const key = (head: number, seq: number) => head * 1000 + seq;
const source = (head: number, seq: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
  k.fill(key(head, seq), ko, ko + hd);
  v.fill(-key(head, seq), vo, vo + hd);
};

/** Four heads in two shards, 40 audio positions; each head keeps 12 (3 pages) and the prompt's one text token (1 page). */
function setup(maxPages?: number) {
  const heads = 4;
  const A = 40;
  const numPages = 16;
  const storage = new MovingStorage(numPages * P);
  const shards: PoolShard[] = [
    { firstHead: 0, heads: 2, firstPage: 0, pages: 8 },
    { firstHead: 2, heads: 2, firstPage: 8, pages: 8 },
  ];
  const r = new Residency(
    { heads, headDim: hd, pageSize: P, numPages, shards, audioStart: 1, audioLength: A, growPages: 2, maxPages },
    storage,
  );
  const gpu = Int32Array.from({ length: 12 }, (_, i) => 3 * i);
  const cpu = Int32Array.from({ length: A }, (_, i) => i);
  const { gathers } = r.applyPrefill({ heads: Array.from({ length: heads }, () => ({ gpu, cpu })) }, [0], source);
  // The backend's part: the kept prefill rows into their slots.
  const row = new Float32Array(hd);
  for (const g of gathers)
    g.slots.forEach((slot, i) => storage.writeRows(slot, 1, row.fill(key(g.head, g.seqPositions[i])), row));
  return { r, storage, heads, A };
}

/** Every audio slot holds its own key, every text token one slot per head in the head's own shard. */
function check(r: Residency, storage: MovingStorage, heads: number, A: number, text: number[]) {
  const bad: string[] = [];
  for (let h = 0; h < heads; h++) {
    const shard = r.pages.shards[r.pages.shardIndexOf(h)];
    for (const page of r.pageTable(h))
      if (page < shard.firstPage || page >= shard.firstPage + shard.pages)
        bad.push(`head ${h}: page ${page} outside its shard`);
    const pages = new Set(r.pageTable(h));
    for (let p = 0; p < A; p++) {
      const slot = r.slotOf(h, p);
      if (slot === EMPTY) continue;
      if (r.positions[slot] !== 1 + p || storage.k[slot * hd] !== key(h, 1 + p))
        bad.push(`head ${h} audio ${p}: slot ${slot} holds ${r.positions[slot]} / ${storage.k[slot * hd]}`);
      if (!pages.has(Math.floor(slot / P))) bad.push(`head ${h} audio ${p}: page not in its table`);
    }
    for (const seq of text) {
      const slots = [...pages]
        .flatMap((pg) => Array.from({ length: P }, (_, i) => pg * P + i))
        .filter((s) => r.positions[s] === seq);
      if (slots.length !== 1) bad.push(`head ${h}: text ${seq} in ${slots.length} slots`);
    }
  }
  expect(bad.slice(0, 5)).toEqual([]);
}

describe('text KV on demand', () => {
  it('grows the shards as text is generated and keeps every audio row, text slot and recall in place', () => {
    const { r, storage, heads, A } = setup();
    const out = new Int32Array(heads);
    const text = [0];
    // 30 tokens: the prompt's text page fills, then the free pages, then the shards grow.
    for (let t = 0; t < 30; t++) {
      const seq = 100 + t;
      r.appendText(seq, out);
      for (let h = 0; h < heads; h++)
        storage.writeRows(out[h], 1, new Float32Array(hd).fill(-seq), new Float32Array(hd));
      text.push(seq);
      // A release and a recall of the same head between steps, as a policy's plans do.
      if (t % 7 === 3) r.apply({ release: [{ head: 1, positions: Int32Array.of(0, 3, 6, 9, 12) }], recall: [] });
      if (t % 7 === 5)
        r.apply({ release: [], recall: [{ head: 1, positions: Int32Array.of(0, 1, 2, 3, 4, 5, 6, 9, 12) }] });
    }
    expect(r.growths).toBeGreaterThan(3);
    expect(storage.grown).toBe(r.growths);
    check(r, storage, heads, A, text);
    // Text slots kept their rows through every move.
    for (let h = 0; h < heads; h++) expect(storage.k[out[h] * hd]).toBe(-129);
    // Growth adds growPages per head at a time: less than that is ever left unused per shard.
    const used = r.pages.usedPages;
    expect(r.pages.capacity - used).toBeLessThan(2 * heads + 2);
    expect(r.stats().textPages).toBe(heads * Math.ceil(31 / P));
  });

  it('takes the pages a release frees before growing', () => {
    const { r, heads } = setup();
    const out = new Int32Array(heads);
    let seq = 100;
    // Fill the free pages: the prompt's text page (4 slots left) and 4 free pages per shard = 2 per head.
    while (r.pages.freePages > 0 || (seq - 100) % P !== 4) r.appendText(seq++, out);
    const growths = r.growths;
    // Every head drops its first 5 kept positions: page 0 of each head's audio empties.
    r.apply({
      release: Array.from({ length: heads }, (_, head) => ({ head, positions: Int32Array.of(0, 3, 6, 9, 12) })),
      recall: [],
    });
    expect(r.pages.freePages).toBe(heads);
    for (let i = 0; i < P; i++) r.appendText(seq++, out);
    expect(r.growths).toBe(growths);
    expect(r.pages.freePages).toBe(0);
  });

  it('grows for a recall only where its rows pass the holes of the head and the free pages', () => {
    const { r, storage, heads, A } = setup();
    const out = new Int32Array(heads);
    let seq = 100;
    const text = [0];
    while (r.pages.freePages > 0 || (seq - 100) % P !== 4) {
      r.appendText(seq, out);
      for (let h = 0; h < heads; h++)
        storage.writeRows(out[h], 1, new Float32Array(hd).fill(-seq), new Float32Array(hd));
      text.push(seq++);
    }
    const growths = r.growths;
    // Head 1 leaves 3 of the 5 positions of its first audio page, the page stays: 3 holes, no free page.
    r.apply({ release: [{ head: 1, positions: Int32Array.of(0, 3, 6) }], recall: [] });
    expect(r.pages.freePages).toBe(0);
    // Back into its holes (a fresh page each for the bound, none in fact): no growth.
    r.apply({ release: [], recall: [{ head: 1, positions: Int32Array.of(1, 3, 6) }] });
    expect(r.growths).toBe(growths);
    // Past the holes left (3 in its last audio page, from the prefill): head 1's shard grows, the other does not.
    const other = r.pages.shards[1].pages;
    r.apply({ release: [], recall: [{ head: 1, positions: Int32Array.of(0, 2, 4, 5, 7) }] });
    expect(r.growths).toBe(growths + 1);
    expect(r.pages.shards[1].pages).toBe(other);
    check(r, storage, heads, A, text);
  });

  it('refuses growth past the KV budget with a typed error', () => {
    const { r, heads } = setup(18);
    const out = new Int32Array(heads);
    let seq = 100;
    expect(() => {
      for (let t = 0; t < 100; t++) r.appendText(seq++, out);
    }).toThrow(ContextTooLongError);
    expect(r.pages.capacity).toBeLessThanOrEqual(18);
  });
});

describe('CPU backend with text on demand', () => {
  const config = referenceConfig({ numLayers: 2, name: 'small' });
  const weights = randomDecoderWeights(config, 7);
  const N = 120;
  const audio = randomEmbeddings(config, N, 3);

  /** Greedy tokens, the logits' bits and the pool's growths of a WnW-like run. */
  async function run(kvGrowPages: number, layered: boolean) {
    const be = new CpuBackend(config, weights, { kvGrowPages, kvPrecision: 'f16' });
    const policy = createPolicy('snapkv', { budget: 0.3 });
    const layout = policyLayout(config, N);
    const request = { ...policy.request(layout), decodeHeads: [0, kvHeadCount(config) - 1] };
    const opts = { audioLength: N, maxNewTokens: 80, request, returnLogits: true };
    let token: number;
    let session: CpuDecodeSession;
    if (layered) {
      const byLayer: LayerPrefill = policy.prefillByLayer!(layout);
      const r = await be.openByLayer(opts).prefill(audio, byLayer);
      token = r.token;
      session = r.session;
    } else {
      const pre = await be.open(opts).prefill(audio);
      session = await pre.place(policy.prefill(pre.observation));
      token = pre.token;
    }
    const tokens = [token];
    const logits: number[] = [];
    for (let s = 0; s < 70; s++) {
      const r = await session.step(tokens[tokens.length - 1]);
      tokens.push(r.token);
      logits.push(r.logits![r.token], r.logits![0]);
    }
    const growths = session.counters().poolGrowths;
    session.close();
    return { tokens, logits, growths };
  }

  it('a full cache prefilled per layer and grown every page decodes as dense causal recomputation does', async () => {
    const be = new CpuBackend(config, weights, { kvGrowPages: 1 });
    const request = { decodeHeads: [0], prefillQueries: 3 };
    const layout = policyLayout(config, N);
    const r0 = await be
      .openByLayer({ audioLength: N, maxNewTokens: 64, request, returnLogits: true })
      .prefill(audio, createPolicy('full', { budget: 1 }).prefillByLayer!(layout));
    const session = r0.session;
    let token = r0.token;
    const generated: number[] = [];
    let logits: Float32Array = new Float32Array(0);
    for (let s = 0; s < 60; s++) {
      generated.push(token);
      const r = await session.step(token);
      logits = r.logits!;
      token = r.token;
    }
    expect(session.counters().poolGrowths).toBeGreaterThan(1);
    const ref = denseLogits(config, weights, audio, N, request, generated);
    let err = 0;
    let norm = 0;
    ref.forEach((x, j) => {
      err += (x - logits[j]) ** 2;
      norm += x ** 2;
    });
    expect(norm).toBeGreaterThan(0);
    expect(err / norm).toBeLessThan(1e-10);
  });

  for (const layered of [false, true]) {
    it(`decodes the same tokens and logits whether the pool grows every page or once (${layered ? 'per-layer' : 'whole-plan'} prefill)`, async () => {
      const often = await run(1, layered);
      const once = await run(64, layered);
      expect(often.growths).toBeGreaterThan(1);
      expect(once.growths).toBe(1);
      expect(often.tokens).toEqual(once.tokens);
      expect(often.logits).toEqual(once.logits);
    });
  }
});
