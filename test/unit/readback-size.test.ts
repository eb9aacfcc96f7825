/**
 * What a decode step reads back on WebGPU (session.ts readbackLayout, which sizes the ring
 * and which the step's copies fill): at 30 minutes of Voxtral-Mini-3B's shape, WnW at 0.2
 * reads the token and its chunk choice, under 1 KB, where the anchors' weights were
 * 4 · anchors · audio tokens bytes.
 */
import { describe, expect, it } from 'vitest';
import { readbackLayout } from '../../src/backend/webgpu/session.js';
import { policyLayout } from '../../src/backend/prompt.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { syntheticHeads } from '../../src/bench/decode.js';
import { createPolicy } from '../../src/policy/registry.js';

describe('readback per step', () => {
  const c = shapeConfig('voxtral-mini-3b', 30);
  const A = 30 * 60 * c.audio.tokensPerSecond;
  const wnw = createPolicy('wnw', { budget: 0.2, heads: syntheticHeads(c, A) });
  const req = wnw.request(policyLayout(c, A));
  /** Bytes a step copies back: the token (4 of the slot's 16 header bytes) and what follows the header. */
  const bytes = (r: typeof req, logits = false) => {
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
});
