/**
 * Same request, same answer: on a recording, a request repeated with the same options gives
 * the token ids it gave the first time, and those of a freshly opened recording, whatever
 * ran in between, under every policy (reference model, CPU backend). The second transcription
 * reuses the whole prompt as before; what the first request's decode moved (WnW's tidal
 * recalls, the paged policies' chosen pages) goes back to the placement first.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { promptLength } from '../../src/model/config.js';
import type { PolicyName } from '../../src/policy/registry.js';
import type { RequestOptions, TranscriptionResult } from '../../src/types.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');
const CLIP = join(MODEL, 'fixtures', 'clip1.wav');

/** A request's ids, every step's logits and, per KV head and audio position, what the GPU held at its first decode step. */
interface Logged {
  r: TranscriptionResult;
  logits: Float32Array[];
  heldAtStart: Uint8Array;
}

async function logged(
  heads: number,
  audioLength: () => number,
  run: (o: RequestOptions) => Promise<TranscriptionResult>,
  options: RequestOptions,
): Promise<Logged> {
  const logits: Float32Array[] = [];
  let heldAtStart = new Uint8Array(0);
  const r = await run({
    ...options,
    probe: {
      onLogits: (_, l) => void logits.push(l.slice()),
      onResidency: (step, resident) => {
        if (step !== 0) return;
        const N = audioLength();
        heldAtStart = new Uint8Array(heads * N);
        for (let h = 0; h < heads; h++) for (let p = 0; p < N; p++) heldAtStart[h * N + p] = resident(h, p) ? 1 : 0;
      },
    },
  });
  expect(r.error).toBeUndefined();
  return { r, logits, heldAtStart };
}

function worstLogit(a: Float32Array[], b: Float32Array[]): number {
  expect(b.length).toBe(a.length);
  let worst = 0;
  a.forEach((l, s) => l.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - b[s][j])))));
  return worst;
}

/** Every policy the registry has, at 0.2; the paged ones on 4-position pages, so a short clip's pages move at all. */
const POLICIES: { policy: PolicyName; budget: number; policyOptions?: Record<string, number> }[] = [
  { policy: 'full', budget: 1 },
  { policy: 'wnw', budget: 0.2 },
  { policy: 'snapkv', budget: 0.2 },
  { policy: 'quest', budget: 0.2, policyOptions: { pageSize: 4 } },
  { policy: 'quest', budget: 0.2 },
  { policy: 'arkvale', budget: 0.2, policyOptions: { pageSize: 4, sinkPages: 1, recentPages: 1 } },
  { policy: 'adakv', budget: 0.2 },
  { policy: 'audiokv', budget: 0.2 },
  { policy: 'h2o', budget: 0.2 },
  { policy: 'streaming', budget: 0.2 },
];

describe('same request, same answer on the reference model', () => {
  let asr: WnwTranscriber;
  let samples: Float32Array;
  beforeAll(async () => {
    asr = await loadTranscriber({ model: MODEL, backend: 'cpu', policy: 'full' });
    samples = await toMono16k(new Uint8Array(readFileSync(CLIP)));
  }, 120_000);
  afterAll(() => asr?.dispose());

  for (const spec of POLICIES) {
    const name = `${spec.policy}${spec.policyOptions ? ` ${JSON.stringify(spec.policyOptions)}` : ''}`;
    it(`${name}: a second transcription equals the first and a fresh recording's`, async () => {
      const c = asr.model.config;
      const heads = c.numLayers * c.numKvHeads;
      const options: RequestOptions = { ...spec };
      const rec = await asr.open(samples);
      const N = () => rec.encoding.audioLength;
      const first = await logged(heads, N, (o) => rec.transcribe(o), options);
      const second = await logged(heads, N, (o) => rec.transcribe(o), options);
      const fresh = await asr.open(samples);
      const alone = await logged(heads, () => fresh.encoding.audioLength, (o) => fresh.transcribe(o), options);
      expect(first.r.tokens.length).toBeGreaterThan(3);
      expect(second.r.tokens).toEqual(first.r.tokens);
      expect(first.r.tokens).toEqual(alone.r.tokens);
      expect(worstLogit(first.logits, second.logits)).toBeLessThan(1e-4);
      expect(worstLogit(alone.logits, second.logits)).toBeLessThan(1e-4);
      // The second reused the whole prompt and the first token its prefill predicted, as before.
      expect(second.r.stats.prompt).toEqual({ reusedPositions: promptLength(c, N()), prefilledPositions: 0 });
      // Its first step saw the GPU hold what the first request's first step saw.
      expect(second.heldAtStart.length).toBe(heads * N());
      expect(second.heldAtStart).toEqual(first.heldAtStart);
      fresh.dispose();
    }, 120_000);
  }
});
