/**
 * The pipelined decode loop: a step queued before the last one is read (its token stays on
 * the device) gives the tokens of the loop that waits for every step, on the CPU backend's
 * queue (the WebGPU backend's is checked in e2e/decoder-parity.spec.ts), and the policy
 * interface says which lag a plan gets.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { kvHeadCount } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import { argmax } from '../../src/reference/ops.js';
import { createPolicy } from '../../src/policy/registry.js';
import { planLagOf } from '../../src/policy/types.js';
import type { PrefillPlan } from '../../src/kv/plan.js';
import type { StepResult } from '../../src/backend/types.js';
import type { CpuDecodeSession } from '../../src/backend/cpu/decode-session.js';
import { syntheticHeads } from '../../src/bench/decode.js';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../../src/model/config.js';
import { policyLayout } from '../../src/kv/prompt.js';

const config = referenceConfig({ numLayers: 2, name: 'small' });
const weights = randomDecoderWeights(config, 7);
const N = 90;
const request = { decodeHeads: [0, 5], prefillQueries: 3 };

function fullPlan(): PrefillPlan {
  const all = Int32Array.from({ length: N }, (_, i) => i);
  return { heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

async function session(
  be = new CpuBackend(config, weights),
): Promise<{ be: CpuBackend; s: CpuDecodeSession; first: number }> {
  const pre = await be
    .open({ audioLength: N, maxNewTokens: 16, request, returnLogits: true })
    .prefill(randomEmbeddings(config, N, 3));
  const s = await pre.place(fullPlan());
  return { be, s, first: pre.token };
}

describe('pipelined decode on the CPU backend', () => {
  it("queuing step t + 1 (fed the token step t predicts) before reading step t gives the waiting loop's tokens, logits and weights", async () => {
    const a = await session();
    const waited: StepResult[] = [];
    let token = a.first;
    for (let i = 0; i < 8; i++) {
      const r = await a.s.step(token);
      waited.push(r);
      token = r.token;
    }
    const b = await session();
    const piped: StepResult[] = [];
    b.s.submit(b.first);
    for (let i = 0; i < 8; i++) {
      b.s.submit(null);
      piped.push(await b.s.read());
    }
    b.s.close(); // the ninth step, queued and never read, is discarded
    expect(piped.map((r) => r.token)).toEqual(waited.map((r) => r.token));
    expect(new Set(waited.map((r) => r.token)).size).toBeGreaterThan(1); // not a constant stream
    piped.forEach((r, i) => {
      expect(r.observation.step).toBe(i);
      expect(argmax(r.logits!)).toBe(r.token);
      expect(Array.from(r.logits!)).toEqual(Array.from(waited[i].logits!));
      expect(Array.from(r.observation.weights[1])).toEqual(Array.from(waited[i].observation.weights[1]));
    });
  });

  it("a token from the CPU replaces the predicted one (teacher forcing), and a first null is fed the prefill's token", async () => {
    const a = await session();
    a.s.submit(a.first);
    a.s.submit(3);
    const r0 = await a.s.read();
    const r1 = await a.s.read();
    const b = await session();
    const first = await b.s.step(b.first);
    const ref = await b.s.step(3);
    expect(r1.token).toBe(ref.token);
    expect(r0.observation.step).toBe(0);
    await expect(async () => a.s.read()).rejects.toThrow(/no step queued/);
    // A first submit(null) is the step submit(prefill token) queues: same token and logits.
    const c = await session();
    c.s.submit(null);
    const rn = await c.s.read();
    expect(rn.token).toBe(first.token);
    expect(Array.from(rn.logits!)).toEqual(Array.from(first.logits!));
  });

  it('a step queued when its session ends never runs in the next one', async () => {
    const fresh = await session();
    const want = [await fresh.s.step(fresh.first)];
    want.push(await fresh.s.step(want[0].token));

    const be = new CpuBackend(config, weights);
    // Count the decoder's steps on this backend, whichever session runs them.
    const inner = be as unknown as { decode: (...args: unknown[]) => unknown };
    const decode = inner.decode.bind(be);
    let ran = 0;
    inner.decode = (...args: unknown[]) => (ran++, decode(...args));
    const a = await session(be);
    a.s.submit(a.first);
    a.s.submit(null);
    a.s.close();
    const b = await session(be);
    b.s.submit(b.first);
    b.s.submit(null);
    const got = [await b.s.read(), await b.s.read()];
    await new Promise((r) => setTimeout(r, 0));
    expect(ran).toBe(2); // B's two steps only
    expect(got.map((r) => r.token)).toEqual(want.map((r) => r.token));
    got.forEach((r, i) => {
      expect(r.observation.step).toBe(i);
      expect(Array.from(r.logits!)).toEqual(Array.from(want[i].logits!));
    });
    await expect(async () => a.s.read()).rejects.toThrow(/was closed/);
  });
});

describe("the lag a policy's plan gets", () => {
  it('prefill-only policies allow two steps; WnW takes what it is asked, anything else is refused', () => {
    expect(planLagOf(createPolicy('full', { budget: 1 }))).toBe(2);
    expect(planLagOf(createPolicy('snapkv', { budget: 0.2 }))).toBe(2);
    expect(planLagOf({})).toBe(1);
    const heads = syntheticHeads(config, N);
    expect(planLagOf(createPolicy('wnw', { budget: 0.2, heads, planLag: 1 }))).toBe(1);
    expect(planLagOf(createPolicy('wnw', { budget: 0.2, heads, planLag: 2 }))).toBe(2);
    expect(() => createPolicy('wnw', { budget: 0.2, heads, planLag: 3 })).toThrow(/planLag/);
  });

  it("WnW decides its lag per clip: two steps from 0.2 up where the budget holds the lead segment, else the paper's one", () => {
    // The shipped model's heads on a minute of audio: at 0.2 the reserve holds the lead, at 0.1 it cannot.
    const model = 'public/models/wnw-ref';
    const c = parseConfig(JSON.parse(readFileSync(`${model}/config.json`, 'utf8')));
    const heads = JSON.parse(readFileSync(`${model}/heads.json`, 'utf8'));
    const lagAt = (budget: number, opts: Record<string, unknown> = {}, audioLength = 750) => {
      const p = createPolicy('wnw', { budget, heads, ...opts });
      expect(planLagOf(p)).toBe(1); // before it has seen a clip
      p.request(policyLayout(c, audioLength));
      return planLagOf(p);
    };
    expect(lagAt(0.2)).toBe(2);
    expect(lagAt(0.4)).toBe(2);
    expect(lagAt(0.1)).toBe(1);
    // On 166 s the budget at 0.1 holds the lead, but a recall a step late costs the token there: one step.
    expect(lagAt(0.1, {}, 2075)).toBe(1);
    expect(lagAt(0.2, {}, 2075)).toBe(2);
    expect(lagAt(0.2, { planLag: 1 })).toBe(1);
    // Paper mode runs the method as written: one step.
    expect(lagAt(0.2, { strictBudget: false })).toBe(1);
  });
});
