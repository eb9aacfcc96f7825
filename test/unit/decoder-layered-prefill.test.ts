/**
 * Per-layer prefill: each layer's plan is placed as soon as that layer has run, so the
 * prompt's K/V is held one layer at a time. It must decode exactly what the
 * whole-prompt path decodes, and its peak KV memory must be one layer's prompt K/V plus
 * the plan's pool, where the whole-prompt path held every layer's.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import type { CpuDecodeSession } from '../../src/backend/cpu/decode-session.js';
import { policyLayout, textPositions } from '../../src/kv/prompt.js';
import { kvHeadCount, promptLength, segmentLength } from '../../src/model/config.js';
import { poolNeed, RECALL_PAGES_PER_HEAD } from '../../src/kv/sizing.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import { createPolicy, POLICIES, sharedPrefillWindows } from '../../src/policy/registry.js';
import type { KvPolicy } from '../../src/policy/types.js';
import { sessionSizes } from '../../src/backend/webgpu/session-buffers.js';
import { syntheticHeads } from './policy-fixtures.js';

// 4 audio tokens/s: 8-slot pages, so a test-sized recording is long in pages (what bounds WnW's recall headroom).
const base = referenceConfig();
const config = referenceConfig({
  name: 'layered',
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  audio: { ...base.audio, tokensPerSecond: 4 },
});
const weights = randomDecoderWeights(config, 11);

async function decode(
  be: CpuBackend,
  policy: KvPolicy,
  audio: Float32Array,
  N: number,
  layered: boolean,
  steps: number,
  reusePrefill = false,
) {
  const layout = policyLayout(config, N);
  // A prefill kept for the next policy scores the others' windows too, as a run asks for it.
  const req = { ...policy.request(layout), ...(reusePrefill ? { alsoScore: sharedPrefillWindows(layout) } : {}) };
  const opts = { audioLength: N, maxNewTokens: steps + 1, request: req, returnLogits: true, reusePrefill };
  let token: number;
  let s: CpuDecodeSession;
  const logits: Float32Array[] = [];
  if (layered) {
    const r = await be.openByLayer(opts).prefill(audio, policy.prefillByLayer!(policyLayout(config, N)));
    token = r.token;
    logits.push(r.logits!);
    s = r.session;
  } else {
    const pre = await be.open(opts).prefill(audio);
    s = await pre.place(policy.prefill(pre.observation));
    token = pre.token;
    logits.push(pre.logits!);
  }
  const tokens = [token];
  for (let i = 0; i < steps; i++) {
    const r = await s.step(token);
    await s.apply(policy.afterStep(r.observation));
    logits.push(r.logits!);
    token = r.token;
    tokens.push(token);
  }
  const res = s.residencyState()!;
  const gpu = Array.from({ length: kvHeadCount(config) }, (_, h) => Array.from(res.gpuPositions(h)));
  const memory = be.kvMemory();
  s.close(reusePrefill);
  return { tokens, logits, gpu, stats: be, memory };
}

describe('per-layer prefill', () => {
  const N = 300;
  const audio = randomEmbeddings(config, N, 5);
  const heads = syntheticHeads(policyLayout(config, N), 3);

  it("every policy answers per layer, and a layer's plan reads only its own layer's scores", () => {
    const layout = policyLayout(config, N);
    for (const name of Object.keys(POLICIES)) {
      const policy = createPolicy(name, { budget: 0.2, heads });
      expect(policy.prefillByLayer, name).toBeTypeOf('function');
      const H = layout.numKvHeads;
      const scores = (seed: number) =>
        Array.from({ length: H }, (_, k) =>
          Float32Array.from({ length: N }, (_, p) => Math.abs(Math.sin(seed * 7.1 + k * 3.3 + p * 0.37))),
        );
      const keys = Array.from({ length: H }, (_, k) =>
        Float32Array.from({ length: N * layout.headDim }, (_, i) => Math.cos(k + i * 0.11)),
      );
      // Layer 1 under two different layer-0 inputs: its answer must not change.
      const answers = [1, 2].map((seed) => {
        const run = createPolicy(name, { budget: 0.2, heads }).prefillByLayer!(layout);
        run.layer({ layout, layer: 0, scores: scores(seed), keys });
        return run
          .layer({ layout, layer: 1, scores: scores(9), keys })
          .map((h) => [Array.from(h.gpu), Array.from(h.cpu)]);
      });
      expect(answers[0], name).toEqual(answers[1]);
    }
  });

  for (const name of ['full', 'wnw', 'snapkv', 'quest']) {
    it(`${name}: decodes the same tokens, logits and residency as the whole-prompt path`, async () => {
      const mk = () => createPolicy(name, { budget: 0.2, heads });
      const whole = await decode(new CpuBackend(config, weights), mk(), audio, N, false, 6);
      const byLayer = await decode(new CpuBackend(config, weights), mk(), audio, N, true, 6);
      expect(byLayer.tokens).toEqual(whole.tokens);
      byLayer.logits.forEach((l, i) => expect(Array.from(l)).toEqual(Array.from(whole.logits[i])));
      expect(byLayer.gpu).toEqual(whole.gpu);
    });
  }

  it("shares one prefill between policies (the eval's memo) with the same results", async () => {
    const be = new CpuBackend(config, weights);
    const fresh = await decode(
      new CpuBackend(config, weights),
      createPolicy('wnw', { budget: 0.2, heads }),
      audio,
      N,
      true,
      4,
    );
    await decode(be, createPolicy('snapkv', { budget: 0.2 }), audio, N, true, 4, true);
    // The un-planned prompt K/V of every layer outlives the session for the next policy.
    const layerKv = 8 * promptLength(config, N) * config.numKvHeads * config.headDim;
    be.open({ audioLength: N, maxNewTokens: 1, request: { decodeHeads: [], prefillQueries: 1 } });
    expect(be.kvMemory().liveBytes).toBe(config.numLayers * layerKv);
    const memoised = await decode(be, createPolicy('wnw', { budget: 0.2, heads }), audio, N, true, 4, true);
    expect(memoised.tokens).toEqual(fresh.tokens);
    expect(memoised.gpu).toEqual(fresh.gpu);
    // Without reuse the next session starts with no prompt K/V held.
    await decode(be, createPolicy('wnw', { budget: 0.2, heads }), audio, N, true, 1, false);
    be.open({ audioLength: N, maxNewTokens: 1, request: { decodeHeads: [], prefillQueries: 1 } });
    expect(be.kvMemory().liveBytes).toBe(0);
  });
});

describe('peak KV memory on a long recording', () => {
  // 1,200 audio tokens (5 min at 4 tokens/s): long enough that WnW's recall headroom
  // (at most 48 pages a head) is small against the full cache's 150 audio pages a head.
  const N = 1200;
  const steps = 2;
  const audio = randomEmbeddings(config, N, 6);
  const heads = syntheticHeads(policyLayout(config, N), 4);
  const n = promptLength(config, N);
  const P = segmentLength(config);
  const H = kvHeadCount(config);
  const hd = config.headDim;
  const textTokens = textPositions(config, N).length + steps + 1;
  const layerKv = 2 * n * config.numKvHeads * hd * 4; // K and V of one layer, f32
  const pageBytes = 2 * P * hd * 4;
  const fullPool = H * (Math.ceil(N / P) + Math.ceil(textTokens / P)) * pageBytes;

  it("full cache: the whole-prompt path peaks at every layer's prompt K/V plus the pool; per layer at one layer's", async () => {
    const whole = await decode(
      new CpuBackend(config, weights),
      createPolicy('full', { budget: 1 }),
      audio,
      N,
      false,
      steps,
    );
    expect(whole.memory.peakBytes).toBe(config.numLayers * layerKv + fullPool);
    const byLayer = await decode(
      new CpuBackend(config, weights),
      createPolicy('full', { budget: 1 }),
      audio,
      N,
      true,
      steps,
    );
    expect(byLayer.memory.peakBytes).toBe(layerKv + fullPool);
  });

  it("WebGPU sizes (memoryNeed()): a per-layer session's prefill buffers hold one layer's prompt K/V, not every layer's", () => {
    const opts = { audioLength: N, maxNewTokens: steps + 1, request: { decodeHeads: [], prefillQueries: 3 } };
    const limits = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30 };
    const whole = sessionSizes(config, { ...opts, layered: false }, limits);
    const layered = sessionSizes(config, { ...opts, layered: true }, limits);
    expect(layered.prefillKvLayers).toBe(1);
    expect(whole.prefillBytes - layered.prefillBytes).toBe((config.numLayers - 1) * layerKv);
  });

  it('WebGPU sizes: with an f16 pool the prompt K/V held are f16 too, n · KVD · 2 · 2 bytes fewer a layer', () => {
    const opts = { audioLength: N, maxNewTokens: steps + 1, request: { decodeHeads: [], prefillQueries: 3 } };
    const limits = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30 };
    const kvd = config.numKvHeads * hd;
    for (const layered of [true, false]) {
      const f32 = sessionSizes(config, { ...opts, layered }, limits, undefined, 4);
      const f16 = sessionSizes(config, { ...opts, layered }, limits, undefined, 2);
      expect(f16.kvElementBytes).toBe(2);
      expect(f32.prefillBytes - f16.prefillBytes).toBe(f16.prefillKvLayers * n * kvd * 2 * 2);
      expect(f16.decodeBytes).toBe(f32.decodeBytes);
    }
  });

  it("WnW at 0.2 per layer peaks at one layer's prompt K/V plus its pool, far below the full cache", async () => {
    const policy = createPolicy('wnw', { budget: 0.2, heads });
    const be = new CpuBackend(config, weights);
    const layout = policyLayout(config, N);
    const r = await be
      .openByLayer({ audioLength: N, maxNewTokens: steps + 1, request: policy.request(layout) })
      .prefill(audio, policy.prefillByLayer!(layout));
    const pool = poolNeed(r.plan, P, textTokens).total * pageBytes;
    expect(be.kvMemory().peakBytes).toBe(layerKv + pool);
    // The pool from the shapes alone: the strict budget keeps at most 0.2 · H · N audio
    // positions (plus a part-filled page per head), recall headroom is at most 48 pages
    // per tidal head, text fills its own pages.
    const tidal = heads.roles['0.2'].tidal.length;
    const poolBound =
      (Math.floor((0.2 * H * N) / P) + H + tidal * RECALL_PAGES_PER_HEAD + H * Math.ceil(textTokens / P)) * pageBytes;
    expect(pool).toBeLessThanOrEqual(poolBound);
    const fullWhole = config.numLayers * layerKv + fullPool;
    // Saved against today's full-cache peak: the other layers' prompt K/V and the pages WnW does not keep.
    expect(fullWhole - be.kvMemory().peakBytes).toBeGreaterThanOrEqual(
      (config.numLayers - 1) * layerKv + fullPool - poolBound,
    );
    expect(be.kvMemory().peakBytes).toBeLessThan(0.5 * fullWhole);
  });
});
