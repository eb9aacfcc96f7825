import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { denseLogits as dense } from '../helpers/dense-logits.js';
import { audioStart, kvHeadCount, promptLength, segmentLength } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import type { PrefillPlan } from '../../src/kv/plan.js';

const config = referenceConfig({ numLayers: 2, name: 'small' });
const weights = randomDecoderWeights(config, 11);
const N = 40;
const request = { decodeHeads: [0, 5], prefillQueries: 3 };

function fullPlan(): PrefillPlan {
  const all = Int32Array.from({ length: N }, (_, i) => i);
  return { heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

const relErr = (a: Float32Array, b: Float32Array) => {
  let err = 0;
  let norm = 0;
  for (let j = 0; j < a.length; j++) {
    err += (a[j] - b[j]) ** 2;
    norm += a[j] ** 2;
  }
  return err / norm;
};

describe('a decode session rewound to a fork point', () => {
  it('continues as if the text after the fork had never been written, and gives its pages back', async () => {
    const audio = randomEmbeddings(config, N, 5);
    const be = new CpuBackend(config, weights);
    const pre = await be.open({ audioLength: N, maxNewTokens: 64, request, returnLogits: true }).prefill(audio);
    const s = await pre.place(fullPlan());
    const fork = promptLength(config, N);
    expect(s.position).toBe(fork);
    const placedPages = s.residency().textPages;
    const placedBytes = s.residency().gpuBytesInUse;
    // A first request writes more than two pages of text per head (a page is a segment's slots).
    const first = Array.from({ length: 2 * segmentLength(config) + 3 }, (_, i) => (i * 7 + 3) % config.vocabSize);
    for (const t of first) await s.step(t);
    expect(s.residency().textPages).toBeGreaterThan(placedPages);
    await s.rewind(fork);
    expect(s.position).toBe(fork);
    expect(s.residency().textPages).toBe(placedPages);
    expect(s.residency().gpuBytesInUse).toBe(placedBytes);
    // A second request from the fork: each step equals the dense recomputation of prompt + its own tokens only.
    const second = [5, 6, 12, 40, 7];
    for (let i = 0; i < second.length; i++) {
      const r = await s.step(second[i]);
      const ref = dense(config, weights, audio, N, request, second.slice(0, i + 1));
      expect(relErr(ref, r.logits!)).toBeLessThan(1e-10);
    }
    // A rewind into the middle of the text keeps what came before it.
    await s.rewind(fork + 2);
    const r = await s.step(33);
    expect(relErr(dense(config, weights, audio, N, request, [5, 6, 33]), r.logits!)).toBeLessThan(1e-10);
    s.close();
  });

  it('drops the steps still queued, refuses the audio and a position ahead, and wants a fed token next', async () => {
    const audio = randomEmbeddings(config, N, 6);
    const be = new CpuBackend(config, weights);
    const pre = await be.open({ audioLength: N, maxNewTokens: 16, request, returnLogits: true }).prefill(audio);
    const s = await pre.place(fullPlan());
    const fork = promptLength(config, N);
    s.submit(null);
    s.submit(null);
    await s.rewind(fork);
    await expect(s.read()).rejects.toThrow(/no step queued/);
    await expect(s.rewind(audioStart(config) + N - 1)).rejects.toThrow(/inside the prompt's audio/);
    await expect(s.rewind(fork + 1)).rejects.toThrow(/session is at/);
    expect(() => s.submit(null)).toThrow(/feed one/);
    const r = await s.step(pre.token);
    expect(relErr(dense(config, weights, audio, N, request, [pre.token]), r.logits!)).toBeLessThan(1e-10);
    s.close();
  });
});
