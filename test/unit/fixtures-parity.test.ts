/**
 * The CPU backend against the training code's golden fixtures: the same prompt layout,
 * the same logits for 32 greedy decode steps (full cache), the same greedy tokens.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { kvHeadCount, parseConfig } from '../../src/model/config.js';
import { SafeTensors } from '../../src/model/safetensors.js';
import { loadDecoderWeights } from '../../src/model/weights.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');

describe('CPU backend vs golden fixtures', () => {
  for (const clip of ['clip1', 'clip2']) {
    it(`${clip}: logits and greedy tokens of 32 steps`, async (ctx) => {
      const fixture = join(MODEL, 'fixtures', `${clip}.safetensors`);
      if (!existsSync(join(MODEL, 'decoder.safetensors')))
        ctx.skip('public/models/wnw-ref/decoder.safetensors is absent');
      if (!existsSync(fixture)) ctx.skip(`${fixture} is absent`);
      const config = parseConfig(JSON.parse(readFileSync(join(MODEL, 'config.json'), 'utf8')));
      const wb = readFileSync(join(MODEL, 'decoder.safetensors'));
      const weights = loadDecoderWeights(
        config,
        wb.buffer.slice(wb.byteOffset, wb.byteOffset + wb.byteLength) as ArrayBuffer,
      );
      const fb = readFileSync(fixture);
      const st = new SafeTensors(fb.buffer.slice(fb.byteOffset, fb.byteOffset + fb.byteLength) as ArrayBuffer, fixture);
      const emb = st.f32('embeddings');
      const [N] = st.info('embeddings').shape;
      const prompt = Array.from(st.i32('prompt'));
      expect(prompt).toEqual([config.tokens.bos, ...new Array(N).fill(-1), ...config.instruction]);
      const logits = st.f32('logits');
      const tokens = Array.from(st.i32('tokens'));
      const V = config.vocabSize;
      const be = new CpuBackend(config, weights);
      const pre = await be
        .open({
          audioLength: N,
          maxNewTokens: tokens.length + 1,
          request: { decodeHeads: [], prefillQueries: 1 },
          returnLogits: true,
        })
        .prefill(emb);
      const all = Int32Array.from({ length: N }, (_, i) => i);
      const session = await pre.place({
        heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
      });
      const got: number[] = [pre.token];
      const nmse: number[] = [];
      let out = pre.logits!;
      for (let s = 0; s < tokens.length; s++) {
        let num = 0;
        let den = 0;
        for (let v = 0; v < V; v++) {
          num += (out[v] - logits[s * V + v]) ** 2;
          den += logits[s * V + v] ** 2;
        }
        nmse.push(num / den);
        if (s + 1 < tokens.length) {
          const r = await session.step(tokens[s]); // teacher-forced with the golden tokens
          out = r.logits!;
          got.push(r.token);
        }
      }
      expect(Math.max(...nmse)).toBeLessThan(1e-6);
      expect(got).toEqual(tokens);
    });
  }
});
