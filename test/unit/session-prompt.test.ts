/**
 * The prompt travels in the session options: one backend (and the config it shares with
 * the transcriber) serves sessions with different prompts, each decoding as a backend
 * built for that prompt would, and the config never changes under them.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { sessionSizes } from '../../src/backend/webgpu/session-buffers.js';
import { kvHeadCount, type ModelConfig, type PromptIds } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import { createPolicy } from '../../src/policy/registry.js';
import { runTranscription } from '../../src/transcribe/run.js';
import type { LoadedModel } from '../../src/model/loader.js';
import type { SessionOptions } from '../../src/backend/types.js';

const config = referenceConfig({ numLayers: 2, name: 'prompted', instruction: [3, 4] });
const weights = randomDecoderWeights(config, 9);
const N = 60;
const audio = randomEmbeddings(config, N, 4);
/** Another language's prompt: a longer prefix and instruction. */
const other: PromptIds = { prefix: [config.tokens.bos, 7], instruction: [3, 11, 12, 4] };

async function decode(be: CpuBackend, c: ModelConfig, prompt: PromptIds | undefined, steps = 4) {
  const opts: SessionOptions = {
    audioLength: N,
    maxNewTokens: steps + 1,
    request: { decodeHeads: [0], prefillQueries: 2 },
    returnLogits: true,
    ...(prompt ? { prompt } : {}),
  };
  const pre = await be.open(opts).prefill(audio);
  const all = Int32Array.from({ length: N }, (_, i) => i);
  const session = await pre.place({
    heads: Array.from({ length: kvHeadCount(c) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
  });
  const logits = [Array.from(pre.logits!)];
  const weightsOut: number[][] = [];
  let token = pre.token;
  for (let i = 0; i < steps; i++) {
    const r = await session.step(token);
    logits.push(Array.from(r.logits!));
    weightsOut.push(Array.from(r.observation.weights[0]));
    token = r.token;
  }
  session.close(true);
  return { logits, weights: weightsOut, layout: pre.observation.layout };
}

describe('the prompt in the session options', () => {
  it('one backend decodes sessions with different prompts as backends built for each prompt do', async () => {
    const shared = new CpuBackend(config, weights);
    const withOther = await decode(shared, config, other);
    const withOwn = await decode(shared, config, undefined);
    const refOther = await decode(new CpuBackend({ ...config, ...other } as ModelConfig, weights), config, undefined);
    const refOwn = await decode(new CpuBackend(config, weights), config, undefined);
    expect(withOther.logits).toEqual(refOther.logits);
    expect(withOther.weights).toEqual(refOther.weights);
    expect(withOther.layout.instructionLength).toBe(4);
    expect(withOwn.logits).toEqual(refOwn.logits);
    expect(withOther.logits[0]).not.toEqual(withOwn.logits[0]);
    expect(config.prefix).toEqual([config.tokens.bos]);
    expect(config.instruction).toEqual([3, 4]);
  });

  it('a kept prefill serves the next session on the same embeddings with the windows it scored, and only with the same prompt', async () => {
    const be = new CpuBackend(config, weights);
    const session = (prefillQueries: number, prompt?: PromptIds) => ({
      audioLength: N,
      maxNewTokens: 2,
      reusePrefill: true,
      request: { decodeHeads: [], prefillQueries, alsoScore: [32, Infinity, 2] },
      ...(prompt ? { prompt } : {}),
    });
    const reused: (boolean | undefined)[] = [];
    for (const [window, prompt] of [
      [32, undefined],
      [2, undefined],
      [Infinity, undefined],
      [2, other],
      [2, other],
    ] as const) {
      // Left open: the next open closes it and keeps its prefill (what end(true) did).
      reused.push((await be.open(session(window, prompt)).prefill(audio)).reused);
    }
    expect(reused).toEqual([false, true, true, false, true]);
  });

  it("the WebGPU sizes count the session's prompt", () => {
    const limits = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30 };
    const opts = {
      audioLength: N,
      maxNewTokens: 8,
      request: { decodeHeads: [], prefillQueries: 2, instructionQueries: true },
      layered: false,
    };
    const own = sessionSizes(config, opts, limits);
    const s = sessionSizes(config, { ...opts, prompt: other }, limits);
    expect(s.promptLength).toBe(own.promptLength + 3);
    expect(s.textTokens).toBe(6);
    expect(s.instructionQueryRows).toBe(4);
  });

  it("a run hands its prompt to the backend, and a kept prefill the other policies' windows, without touching the config", async () => {
    const before = JSON.stringify(config);
    const be = new CpuBackend(config, weights);
    const begun: SessionOptions[] = [];
    const open = be.open.bind(be);
    const openByLayer = be.openByLayer.bind(be);
    be.open = (o) => {
      begun.push(o);
      return open(o);
    };
    be.openByLayer = (o) => {
      begun.push(o);
      return openByLayer(o);
    };
    const seen: string[] = [];
    const model = {
      config,
      tokenizer: { decoder: () => ({ push: () => '', flush: () => '' }), pieceText: () => '' },
    } as unknown as LoadedModel;
    const res = await runTranscription({
      model,
      backend: be,
      prompt: other,
      policy: createPolicy('full', { budget: 1 }),
      policyName: 'full',
      budget: 1,
      embeddings: audio,
      audioLength: N,
      audioSeconds: N / config.audio.tokensPerSecond,
      encodeMs: 0,
      timingHeads: [],
      tidalHeads: [],
      options: {
        maxNewTokens: 3,
        probe: { forcedTokens: [5, 6, 7], reusePrefill: true },
        onStep: () => void seen.push(JSON.stringify(config)),
      },
      progress: () => {},
    });
    expect(res.error).toBeUndefined();
    expect(begun[0].prompt).toBe(other);
    expect(begun[0].request.prefillQueries).toBe(1);
    expect(begun[0].request.alsoScore).toEqual([32, Infinity, 4]);
    expect(seen.length).toBeGreaterThan(0);
    for (const s of seen) expect(s).toBe(before);
    expect(JSON.stringify(config)).toBe(before);
  });
});
