/**
 * What a decode step reads back on WebGPU (session-buffers.ts readbackLayout, which sizes the ring
 * and which the step's copies fill): at 30 minutes of Voxtral-Mini-3B's shape, WnW at 0.2
 * reads the token and its chunk choice, under 1 KB, where the anchors' weights were
 * 4 · anchors · audio tokens bytes.
 */
import { describe, expect, it } from 'vitest';
import { readbackLayout } from '../../src/backend/webgpu/session-buffers.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { segmentLength } from '../../src/model/config.js';
import type { AttentionRequest } from '../../src/kv/plan.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { syntheticHeads } from '../../src/bench/decode.js';
import { createPolicy } from '../../src/policy/registry.js';
import { CompiledReadouts, type BackendRequest, type Readouts } from '../../src/backend/readouts.js';
import { wordTimingHeads } from '../../src/policy/timing-heads.js';

describe('readback per step', () => {
  const c = shapeConfig('voxtral-mini-3b', 30);
  const A = 30 * 60 * c.audio.tokensPerSecond;
  const wnw = createPolicy('wnw', { budget: 0.2, heads: syntheticHeads(c, A) });
  const req = wnw.request(policyLayout(c, A));
  /** What the device exports for a policy's request and a transcription's other readouts (transcribe/run.ts). */
  const compile = (r: AttentionRequest, readouts: Readouts) =>
    new CompiledReadouts(r, readouts, A, segmentLength(c)).request;
  /** Bytes a step copies back: the token (4 of the slot's 16 header bytes) and what follows the header. */
  const bytes = (r: BackendRequest, logits = false) => {
    const L = readbackLayout(c, { request: r, returnLogits: logits }, A);
    return 4 + L.end - L.logits;
  };

  it('WnW at 0.2, 30 minutes of Voxtral: the token and the top-k chunk indices, under 1 KB', () => {
    expect(A).toBe(22500);
    expect(req.decodeWeights).toBe(false);
    const k = req.decodeChunks!.topChunks;
    expect(k).toBe(100); // 900 two-second chunks, one in nine
    expect(bytes(req)).toBe(4 + 4 * k);
    expect(bytes(req)).toBeLessThan(1024);
    // What the anchors' weights were: 4 bytes per anchor per audio token.
    const anchors = req.decodeHeads.length;
    expect(bytes({ ...req, decodeWeights: true })).toBe(4 + 4 * k + 4 * anchors * A);
    expect(bytes({ ...req, decodeWeights: true })).toBeGreaterThan(300_000);
  });

  it('the full cache reads the token only; segment sums for the tide chart add 4 bytes a segment', () => {
    expect(bytes({ decodeHeads: [], prefillQueries: 1 })).toBe(4);
    expect(bytes({ ...req, decodeChunks: { ...req.decodeChunks!, segmentSums: true } })).toBe(4 + 4 * 100 + 4 * 900);
  });

  it('a WnW transcription with words, as run.ts asks: the token, the chunks and the focus, under 1 KB; the tide chart adds the segment sums', () => {
    const timing = wordTimingHeads(wnw, undefined, 0.2);
    expect(timing).toEqual(req.decodeHeads);
    const words = compile(req, { focus: timing });
    expect(words.decodeWeights).toBe(false);
    expect(words.decodeFocus).toEqual({ heads: timing.length });
    expect(words.decodeChunks?.segmentSums).toBeUndefined();
    expect(bytes(words)).toBe(4 + 4 * 100 + 32);
    expect(bytes(words)).toBeLessThan(1024);
    // What the anchors' weights were: 5 anchors, 4 bytes each per audio token.
    expect(bytes({ ...words, decodeWeights: true }) - bytes(words)).toBe(450_000);
    // The demo page's tide chart (an onStep consumer): 900 segment sums more, 3.6 KB.
    const tide = compile(req, { focus: timing, segmentSums: timing });
    expect(tide.decodeWeights).toBe(false);
    expect(bytes(tide)).toBe(4 + 4 * 100 + 4 * 900 + 32);
    // An onAttention hook still gets every head's weights.
    const all = Array.from({ length: c.numLayers * c.numKvHeads }, (_, h) => h);
    expect(compile(req, { focus: timing, attention: all }).decodeWeights).toBe(true);
  });

  it('the full cache with words: the anchors exported for their focus only, 36 bytes a step', () => {
    const full = createPolicy('full', { budget: 1, heads: syntheticHeads(c, A) });
    const anchors = [3, 17, 40, 41];
    const r = compile(full.request(policyLayout(c, A)), { focus: anchors });
    expect(r.decodeHeads).toEqual(anchors);
    // The anchors are the export's first rows: the device sums them.
    expect(r.decodeFocus).toEqual({ heads: 4 });
    expect(bytes(r)).toBe(4 + 32);
    // Its tide chart has no device segment sums (no chunk choice): the weights come back.
    expect(compile(full.request(policyLayout(c, A)), { focus: anchors, segmentSums: anchors }).decodeWeights).toBe(
      true,
    );
  });

  it("timing heads that are not the export's first rows are summed on the CPU from their weights", () => {
    const r = compile({ decodeHeads: [5, 9], prefillQueries: 1 }, { focus: [9, 12] });
    // Rows 1 and 2 of the export: not the first rows the device sums.
    expect(r.decodeHeads).toEqual([5, 9, 12]);
    expect(r.decodeFocus).toBeUndefined();
    expect(r.decodeWeights).toBe(true);
  });
});
