import { beforeAll, describe, expect, it } from 'vitest';
import { createBackend } from '../../src/backend/create.js';
import type { DecoderBackend } from '../../src/backend/types.js';
import { compareSteps, fidelityMeans, klDivergence, logSoftmax } from '../../src/eval/fidelity.js';
import { fullReference, teacherForced, type Decode, type FullReference } from '../../src/eval/teacher-forced.js';
import { wer } from '../../src/eval/wer.js';
import { measureCoverage, recordAttention, sampleStride } from '../../src/eval/coverage.js';
import type { LoadedModel } from '../../src/model/loader.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import { Tokenizer } from '../../src/model/tokenizer.js';
import { FullPolicy } from '../../src/policy/full.js';
import { StreamingPolicy } from '../../src/policy/streaming.js';
import { NONE } from '../../src/policy/select.js';
import { EMPTY_PLAN, type PolicyLayout, type PrefillObservation, type StepObservation } from '../../src/kv/plan.js';
import type { KvPolicy } from '../../src/policy/types.js';
import { runTranscription } from '../../src/transcribe/run.js';
import type { PolicyName } from '../../src/types.js';

describe('fidelity arithmetic', () => {
  it('log-softmax and KL in f64: equal distributions give 0, a known pair its closed form', () => {
    const a = Float32Array.from([2, 0, 0, 0]);
    const b = Float32Array.from([0, 2, 0, 0]);
    const la = logSoftmax(a);
    expect(la.reduce((s, x) => s + Math.exp(x), 0)).toBeCloseTo(1, 14);
    expect(klDivergence(la, la)).toBe(0);
    expect(klDivergence(la, logSoftmax(b))).toBeCloseTo((2 * (Math.exp(2) - 1)) / (Math.exp(2) + 3), 14);
    // large logits do not overflow
    expect(
      Number.isFinite(klDivergence(logSoftmax(Float32Array.from([1e4, 0])), logSoftmax(Float32Array.from([0, 1e4])))),
    ).toBe(true);
    const f = compareSteps([a, a], [a, b]);
    expect(f).toMatchObject({ steps: 2, agreeing: 1 });
    expect(fidelityMeans(f).agreement).toBe(0.5);
    expect(f.stopShiftSum).toBeNull();
    expect(fidelityMeans({ steps: 0, agreeing: 0, klSum: 0, stopShiftSum: null })).toEqual({
      agreement: null,
      klVsFull: null,
      stopShift: null,
    });
    // the stop token's log-probability, policy minus full, averaged over steps
    const g = fidelityMeans(compareSteps([a, a], [a, b], 0));
    expect(g.stopShift).toBeCloseTo((logSoftmax(b)[0] - la[0]) / 2, 14);
    expect(fidelityMeans(compareSteps([a, b], [a, b], 1)).stopShift).toBe(0);
    expect(() => compareSteps([a], [])).toThrow(/1 steps, the policy for 0/);
  });
});

/** Test-only: drops every audio position of every head at prefill (text KV always stays). */
class NoAudioPolicy implements KvPolicy {
  readonly name = 'no-audio';
  request(_l: PolicyLayout) {
    return { decodeHeads: [], prefillQueries: 1 };
  }
  prefill(obs: PrefillObservation) {
    return {
      heads: Array.from({ length: obs.layout.numLayers * obs.layout.numKvHeads }, () => ({ gpu: NONE, cpu: NONE })),
    };
  }
  afterStep() {
    return EMPTY_PLAN;
  }
}

/** The full cache, recording which steps its plan loop saw. */
class RecordingFull extends FullPolicy {
  readonly steps: number[] = [];
  override afterStep(obs?: StepObservation) {
    this.steps.push(obs!.step);
    return super.afterStep();
  }
}

describe('teacher-forced fidelity on the random reference model (CPU backend)', () => {
  const config = referenceConfig();
  const pieces = ['<pad>', '<s>', '</s>', '<t>', '<a>', '<b>'];
  for (let i = pieces.length; i < config.vocabSize; i++)
    pieces.push(`${i % 3 === 0 ? '\u2581' : ''}${String.fromCharCode(97 + (i % 26))}${i}`);
  const model: LoadedModel = {
    base: 'memory',
    config,
    weights: randomDecoderWeights(config, 3),
    encoderBytes: new Uint8Array(0),
    weightBytes: 0,
    tokenizer: Tokenizer.fromJSON({ type: 'sentencepiece', pieces, bos: 1, eos: 2, pad: 0, unk: 5 }),
  };
  const N = 60;
  const embeddings = randomEmbeddings(config, N, 7);
  let backend: DecoderBackend;
  let ref: FullReference;
  let fullText: string;

  /** One decode of the clip under `make()`'s policy: the transcriber's own loop (run.ts). */
  const decoder =
    (make: () => KvPolicy, name: PolicyName, budget: number): Decode =>
    (options) =>
      runTranscription({
        model,
        backend,
        policy: make(),
        policyName: name,
        budget,
        embeddings,
        audioLength: N,
        audioSeconds: N / 12.5,
        encodeMs: 0,
        timingHeads: [],
        tidalHeads: [],
        options: { maxNewTokens: 24, ...options, probe: { reusePrefill: true, ...options.probe } },
        progress: () => {},
      });
  const full = decoder(() => new FullPolicy(), 'full', 1);

  beforeAll(async () => {
    backend = await createBackend(config, model.weights, { backend: 'cpu' });
    const free = await full({});
    fullText = free.text;
    ref = await fullReference(full, free);
  });

  it('the full cache forced on its own tokens reproduces its free decode', () => {
    expect(ref.tokens.length).toBeGreaterThanOrEqual(12); // enough steps for the comparisons to mean something
    expect(fullText.split(/\s+/).length).toBeGreaterThanOrEqual(3);
    expect(ref.logits).toHaveLength(ref.tokens.length);
    // step t's greedy token is the token the free decode fed next
    ref.logits.forEach((l, t) => {
      if (t + 1 < ref.tokens.length) expect(l.indexOf(Math.max(...l))).toBe(ref.tokens[t + 1]);
    });
  });

  it('runs the policy plan loop on the forced steps', async () => {
    const p = new RecordingFull();
    const f = await teacherForced(
      decoder(() => p, 'full', 1),
      ref,
      {},
    );
    expect(f.steps).toBe(ref.tokens.length);
    expect(p.steps).toEqual(ref.tokens.map((_, i) => i));
  });

  it('a policy that keeps everything: WER vs full 0, agreement 1, KL 0, no stop-token shift', async () => {
    for (const [name, make] of [
      ['full', () => new FullPolicy()],
      ['streaming', () => new StreamingPolicy({ budget: 1 })],
    ] as const) {
      const decode = decoder(make, name, 1);
      const free = await decode({});
      expect(wer(ref.text, free.text)).toBe(0);
      // whether or not this random model's free run ended on eos, measure eos's shift
      const m = fidelityMeans(await teacherForced(decode, { ...ref, stopToken: 2 }, {}));
      expect(m.agreement).toBe(1);
      expect(m.klVsFull!).toBeGreaterThanOrEqual(0);
      expect(m.klVsFull!).toBeLessThan(1e-9);
      expect(Math.abs(m.stopShift!)).toBeLessThan(1e-9);
    }
  });

  it('a policy that keeps nothing of the audio does not', async () => {
    const decode = decoder(() => new NoAudioPolicy(), 'full', 1);
    const free = await decode({});
    expect(wer(ref.text, free.text)).toBeGreaterThan(0);
    const f = await teacherForced(decode, { ...ref, stopToken: 2 }, {});
    const m = fidelityMeans(f);
    expect(f.steps).toBe(ref.tokens.length);
    expect(m.agreement!).toBeLessThan(1);
    expect(m.klVsFull!).toBeGreaterThan(1e-3);
    expect(Math.abs(m.stopShift!)).toBeGreaterThan(1e-3);
  });

  it('attention covered: 1 on every head for the full cache, 0 where a policy keeps no audio, the kept share for a window', async () => {
    const withAttention = await fullReference(full, await full({}), {}, { attention: true });
    const sample = withAttention.attention!;
    expect(sample.stride).toBe(1);
    expect(sample.weights.size).toBe(withAttention.tokens.length);
    const heads = config.numLayers * config.numKvHeads;
    for (const w of sample.weights.values()) {
      expect(w).toHaveLength(heads);
      for (const x of w) expect(x.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    }
    const all = (await teacherForced(full, withAttention, {})).coverage!;
    expect(all.steps).toBe(withAttention.tokens.length);
    for (const c of all.perHead) expect(c).toBeCloseTo(1, 12);
    const none = (
      await teacherForced(
        decoder(() => new NoAudioPolicy(), 'full', 1),
        withAttention,
        {},
      )
    ).coverage!;
    expect(none.perHead.every((c) => c === 0)).toBe(true);
    // StreamingLLM keeps the first 4 and the last positions: its coverage is the full cache's mass there.
    const streaming = (
      await teacherForced(
        decoder(() => new StreamingPolicy({ budget: 0.2 }), 'streaming', 0.2),
        withAttention,
        {},
      )
    ).coverage!;
    expect(streaming.mean).toBeGreaterThan(0);
    expect(streaming.mean).toBeLessThan(1);
    // Without the attention record there is nothing to measure against.
    expect((await teacherForced(full, ref, {})).coverage).toBeNull();
  });

  it('samples long clips at a stride that bounds the record', () => {
    expect(sampleStride(100, 32, 800)).toBe(1);
    expect(sampleStride(1450, 32, 3000, 8_000_000)).toBe(18);
    const rec = recordAttention(40);
    const w = [new Float32Array(300_000)];
    for (let t = 0; t < 40; t++) rec.onAttention(t, w);
    expect(rec.sample.stride).toBe(sampleStride(40, 1, 300_000));
    expect(rec.sample.weights.size).toBe(Math.ceil(40 / rec.sample.stride));
    // A step measured against a sampled one: share of mass on resident positions.
    const cov = measureCoverage({ stride: 1, weights: new Map([[0, [Float32Array.from([0.5, 0.25, 0.25])]]]) });
    cov.onResidency(0, (_h, p) => p !== 0);
    cov.onResidency(1, () => true); // not sampled: ignored
    expect(cov.result()).toEqual({ perHead: [0.5], mean: 0.5, steps: 1 });
  });

  it('the reference records the stop token the full cache ended on, and none at the length guard', async () => {
    const free = await full({});
    expect(ref.stopToken).toBe(free.stats.stoppedBy === 'eos' ? 2 : null);
    const cut = await full({ maxNewTokens: 3 });
    expect(cut.stats.stoppedBy).toBe('length-guard');
    expect(cut.stats.stopToken).toBeUndefined();
    expect((await fullReference(full, cut)).stopToken).toBeNull();
  });
});
