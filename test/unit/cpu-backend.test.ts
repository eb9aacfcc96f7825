import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { denseLogits as dense } from '../helpers/dense-logits.js';
import { argmax } from '../../src/reference/ops.js';
import { kvHeadCount } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig, rng } from '../../src/model/testing.js';
import type { PrefillPlan } from '../../src/kv/plan.js';

const config = referenceConfig({ numLayers: 2, name: 'small' });
const weights = randomDecoderWeights(config, 7);
const N = 90;
const request = { decodeHeads: [0, 5], prefillQueries: 3 };

function fullPlan(heads: number): PrefillPlan {
  const all = Int32Array.from({ length: N }, (_, i) => i);
  return { heads: Array.from({ length: heads }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

const denseLogits = (tokens: number[], audio: Float32Array) => dense(config, weights, audio, N, request, tokens);

describe('CPU backend', () => {
  it('paged decode over the pool equals dense causal recomputation of the whole sequence', async () => {
    const audio = randomEmbeddings(config, N, 3);
    const be = new CpuBackend(config, weights);
    const pre = await be.open({ audioLength: N, maxNewTokens: 8, request, returnLogits: true }).prefill(audio);
    const s = await pre.place(fullPlan(kvHeadCount(config)));
    const generated: number[] = [];
    let token = pre.token;
    expect(argmax(denseLogits([], audio))).toBe(pre.token);
    for (let i = 0; i < 6; i++) {
      generated.push(token);
      const r = await s.step(token);
      const ref = denseLogits(generated, audio);
      let err = 0;
      let norm = 0;
      for (let j = 0; j < ref.length; j++) {
        err += (ref[j] - r.logits![j]) ** 2;
        norm += ref[j] ** 2;
      }
      expect(norm).toBeGreaterThan(0);
      expect(err / norm).toBeLessThan(1e-10);
      // Exported weights are a distribution over audio (plus text): sum in (0, g].
      const sum = r.observation.weights[0].reduce((a, b) => a + b, 0);
      expect(sum).toBeGreaterThan(0);
      expect(sum).toBeLessThanOrEqual(2 + 1e-6);
      token = r.token;
    }
  });

  it('prefill scores sum the last queries softmax mass on audio', async () => {
    const audio = randomEmbeddings(config, N, 4);
    const be = new CpuBackend(config, weights);
    const pre = await be.open({ audioLength: N, maxNewTokens: 4, request }).prefill(audio);
    expect(pre.observation.scores).toHaveLength(kvHeadCount(config));
    for (const s of pre.observation.scores) {
      const total = s.reduce((a, b) => a + b, 0);
      // 3 queries x 2 query heads, each a distribution that also covers bos and text.
      expect(total).toBeGreaterThan(0.5);
      expect(total).toBeLessThan(6 + 1e-6);
    }
  });

  it('release then recall restores the same logits as never releasing', async () => {
    const audio = randomEmbeddings(config, N, 5);
    const heads = kvHeadCount(config);
    const all = Int32Array.from({ length: N }, (_, i) => i);
    const plan: PrefillPlan = { heads: Array.from({ length: heads }, () => ({ gpu: all, cpu: all })) };
    const run = async (churn: boolean) => {
      const be = new CpuBackend(config, weights);
      const pre = await be.open({ audioLength: N, maxNewTokens: 8, request, returnLogits: true }).prefill(audio);
      let t = pre.token;
      const s = await pre.place(plan);
      const out: Float32Array[] = [];
      const rand = rng(9);
      for (let i = 0; i < 5; i++) {
        if (churn) {
          const moves = Array.from({ length: heads }, (_, h) => ({
            head: h,
            positions: Int32Array.from(all.filter(() => rand() < 0.5)),
          }));
          await s.apply({ recall: [], release: moves });
          expect(s.residency().rGpu).toBeLessThan(0.75);
          await s.apply({ recall: moves, release: [] });
          expect(s.residency().rGpu).toBe(1);
        }
        const r = await s.step(t);
        out.push(r.logits!);
        t = r.token;
      }
      return out;
    };
    const a = await run(false);
    const b = await run(true);
    for (let i = 0; i < a.length; i++) {
      let err = 0;
      for (let j = 0; j < a[i].length; j++) err = Math.max(err, Math.abs(a[i][j] - b[i][j]));
      expect(err).toBeLessThan(1e-9);
    }
  });
});
