/**
 * The fit check counts the head triage a folder without heads.json will run first
 * (src/backend/webgpu/fit.ts `triagePeakBytes`): a model that can transcribe in a page can
 * be triaged in it. The figure itself is checked against the GPU's live bytes by allocation
 * in e2e/hf-parity.spec.ts (triage_memory_voxtral_shape).
 */
import { describe, expect, it } from 'vitest';
import {
  memoryNeed,
  triagePeakBytes,
  TRIAGE_CLIP_SECONDS,
  TEXT_TOKENS_PER_SECOND,
} from '../../src/backend/webgpu/fit.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';

describe('the triage in the fit check', () => {
  const c = shapeConfig('voxtral-mini-3b', 30);
  const request = { weightFormat: 'q4' as const, tied: false, kvPrecision: 'f16' as const, budget: 0.2 };

  it("a triage of a 30 s clip (375 audio tokens, 121 answer rows) is the weights and a few hundred MB at Voxtral-Mini-3B's shape", () => {
    const weights = decoderWeightBytes(c, 'q4', false).total;
    const t = triagePeakBytes(c, weights, 375, 121, 'f16');
    expect(memoryNeed(c, { ...request, audioTokens: 12.5 * 60 }).triageBytes).toBe(t);
    expect(TRIAGE_CLIP_SECONDS * TEXT_TOKENS_PER_SECOND + 1).toBe(121);
    // Over the weights: a session of 495 rows with one layer's K/V, dl over the vocabulary for 121 rows (63 MB), the rest small.
    expect(t - weights).toBeGreaterThan(4 * 121 * c.vocabSize);
    expect(t - weights).toBeLessThan(0.5e9);
  });

  it('counts in the peak only where the folder has no heads.json, and then a short clip is sized for it', () => {
    const short = memoryNeed(c, { ...request, audioTokens: 50 });
    const triaged = memoryNeed(c, { ...request, audioTokens: 50, triage: true });
    expect(short.peakBytes).toBeLessThan(short.triageBytes);
    expect(triaged.peakBytes).toBe(short.triageBytes);
    // An hour's transcription needs more than the triage: the triage changes nothing there.
    const hour = memoryNeed(c, { ...request, audioTokens: 12.5 * 3600, triage: true });
    expect(hour.peakBytes).toBe(memoryNeed(c, { ...request, audioTokens: 12.5 * 3600 }).peakBytes);
    expect(hour.peakBytes).toBeGreaterThan(hour.triageBytes);
  });
});
