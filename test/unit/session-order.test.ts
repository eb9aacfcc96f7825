/**
 * The order of a session's calls is carried by its types: each misuse the backends once
 * refused at run time now fails to compile (`npm test` type-checks this file, and each
 * `@ts-expect-error` fails the build where the line it guards compiles). What a type cannot
 * say (a stage used twice, a session used after close, a read with nothing queued) throws.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import type { DecoderBackend, SessionOptions } from '../../src/backend/types.js';
import type { LayerPrefill, PrefillPlan } from '../../src/kv/plan.js';
import { kvHeadCount } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';

const config = referenceConfig({ numLayers: 2, name: 'small' });
const weights = randomDecoderWeights(config, 7);
const N = 40;
const opts: SessionOptions = {
  audioLength: N,
  maxNewTokens: 8,
  request: { decodeHeads: [0], prefillQueries: 3 },
  returnLogits: true,
};
const all = Int32Array.from({ length: N }, (_, i) => i);
const plan: PrefillPlan = {
  heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
};

/** Never called: it only has to type-check, each misuse refused by the compiler. */
export async function misuses(be: DecoderBackend, audio: Float32Array, run: LayerPrefill): Promise<void> {
  const stage = be.open(opts);
  // @ts-expect-error a step before the prefill: a prefill stage has no step
  await stage.step(1);
  // @ts-expect-error the placement before the prefill: only a prefilled session places
  await stage.place(plan);
  // @ts-expect-error a whole-prompt session does not prefill layer by layer
  await stage.prefill(audio, run);
  const pre = await stage.prefill(audio);
  // @ts-expect-error a step before the placement
  await pre.step(pre.token);
  // @ts-expect-error a pipelined step before the placement
  pre.submit(null);
  // @ts-expect-error a prefilled session does not prefill again
  await pre.prefill(audio);
  const session = await pre.place(plan);
  // @ts-expect-error a decode session does not prefill again
  await session.prefill(audio);
  // @ts-expect-error nor place again
  await session.place(plan);
  const layered = be.openByLayer(opts);
  // @ts-expect-error a layered session prefills with its layers' answers
  await layered.prefill(audio);
  // @ts-expect-error a layered session has no separate placement
  await (await layered.prefill(audio, run)).place(plan);
  // @ts-expect-error the backend itself has no session calls
  await be.step(1);
}

describe("what a session's types cannot carry throws once, with what to do", () => {
  it('a stage used twice, a session used after close, a read with nothing queued', async () => {
    const be = new CpuBackend(config, weights);
    const audio = randomEmbeddings(config, N, 3);
    const stage = be.open(opts);
    const pre = await stage.prefill(audio);
    await expect(stage.prefill(audio)).rejects.toThrow(/was prefilled: use the object its last call returned/);
    const session = await pre.place(plan);
    await expect(pre.place(plan)).rejects.toThrow(/was placed/);
    await expect(session.read()).rejects.toThrow(/no step queued/);
    const r = await session.step(pre.token);
    expect(r.observation.step).toBe(0);
    session.close();
    await expect(session.step(r.token)).rejects.toThrow(/was closed/);
  });

  it("a first submit(null) feeds the prefill's greedy token", async () => {
    const be = new CpuBackend(config, weights);
    const audio = randomEmbeddings(config, N, 4);
    const run = async (first: (pre: { token: number }) => number | null) => {
      const pre = await be.open(opts).prefill(audio);
      const s = await pre.place(plan);
      s.submit(first(pre));
      const r = await s.read();
      s.close();
      return r;
    };
    const fed = await run((pre) => pre.token);
    const implicit = await run(() => null);
    expect(implicit.token).toBe(fed.token);
    expect(Array.from(implicit.logits!)).toEqual(Array.from(fed.logits!));
  });

  it('opening a session closes the one before: its steps no longer run', async () => {
    const be = new CpuBackend(config, weights);
    const audio = randomEmbeddings(config, N, 5);
    const a = await (await be.open(opts).prefill(audio)).place(plan);
    be.open(opts).close();
    await expect(a.step(1)).rejects.toThrow(/was closed/);
  });
});
