/**
 * Same request, same answer: on a recording, a request repeated with the same options gives
 * the token ids it gave the first time, and those of a freshly opened recording, whatever
 * ran in between (CPU backend): every policy on the reference model (two transcriptions), and
 * on each family's miniature the full cache, WnW at 0.2, SnapKV and Quest around a question.
 * The reuse of the prompt's positions is what it was; what a request's decode moved (WnW's
 * tidal recalls, the paged policies' chosen pages) goes back to the placement first.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { promptLength } from '../../src/model/config.js';
import type { PolicyName } from '../../src/policy/registry.js';
import type { RequestOptions, TranscriptionResult } from '../../src/types.js';
import { subtitlesOf } from '../../src/transcribe/subtitles.js';
import { ensureMiniatures, MINIATURE_FAMILIES } from '../helpers/miniatures.js';
import { withSeededHeads } from '../helpers/seeded-heads.js';

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

  it('cuts subtitles from a result it is given, or from the transcription its options give, whatever ran before', async () => {
    const options: RequestOptions = { policy: 'wnw', budget: 0.2 };
    const rec = await asr.open(samples);
    const first = await rec.transcribe(options);
    const cut = subtitlesOf('srt', first);
    expect(cut).toMatch(/^1\r?\n\d\d:\d\d:\d\d,\d\d\d --> /);
    // A result: its own words, whatever the recording ran (a hand-made one too), and no request.
    const before = rec.lastPrompt;
    const made = { ...first, words: [{ word: 'hand-made', start: 0.5, end: 1.5 }] };
    expect(await rec.subtitles('vtt', made)).toBe('WEBVTT\n\n00:00:00.500 --> 00:00:01.500\nhand-made\n\n');
    expect(rec.lastPrompt).toBe(before);
    // Options: the last transcription with them on this placement stands for a new one (none runs)...
    let tokens = 0;
    const counted = { ...options, onToken: () => void tokens++ };
    expect(await rec.subtitles('srt', counted)).toBe(cut);
    expect(tokens).toBe(0);
    // ...and after another policy placed the audio, one runs, and gives the same cues.
    await rec.transcribe({ policy: 'full', maxNewTokens: 5 });
    expect(await rec.subtitles('srt', counted)).toBe(cut);
    expect(tokens).toBe(first.tokens.length);
    await expect(rec.subtitles('ass' as never, first)).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    rec.dispose();
  }, 120_000);

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
      const alone = await logged(
        heads,
        () => fresh.encoding.audioLength,
        (o) => fresh.transcribe(o),
        options,
      );
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

const MAX_NEW = 12;

/** The four policies of the acceptance on the miniatures; Quest on 4-position pages, so a short clip's pages move. */
const FAMILY_POLICIES: { policy: PolicyName; budget: number; policyOptions?: Record<string, number> }[] = [
  { policy: 'full', budget: 1 },
  { policy: 'wnw', budget: 0.2 },
  { policy: 'snapkv', budget: 0.2 },
  { policy: 'quest', budget: 0.2, policyOptions: { pageSize: 4 } },
];

describe("same request, same answer on each family's miniature", () => {
  let models = '';
  let tmp = '';
  let bytes = new Uint8Array(0);
  beforeAll(async () => {
    models = await ensureMiniatures();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-repeat-'));
    const wav = join(tmp, 'clip.wav');
    const words = 'the quick brown fox jumps over the lazy dog while the sun sets behind the quiet hills';
    execFileSync('espeak-ng', ['-w', wav, words], { stdio: 'ignore' });
    bytes = new Uint8Array(readFileSync(wav));
  }, 180_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: transcribe, ask, transcribe: both transcriptions a fresh recording's, under each policy`, async () => {
      // The heads file is made for the clip's length, which the model's encoding gives.
      const plain = await loadTranscriber({ model: join(models, family), backend: 'cpu', policy: 'full' });
      let N: number;
      try {
        N = (await plain.open(bytes)).encoding.audioLength;
      } finally {
        plain.dispose();
      }
      const dir = withSeededHeads(join(models, family), join(tmp, family), plain, N);
      const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
      try {
        const c = t.model.config;
        const heads = c.numLayers * c.numKvHeads;
        for (const spec of FAMILY_POLICIES) {
          const options: RequestOptions = { ...spec, maxNewTokens: MAX_NEW };
          const rec = await t.open(bytes);
          expect(rec.can.ask).toBe(true);
          const first = await logged(
            heads,
            () => N,
            (o) => rec.transcribe(o),
            options,
          );
          // The same readouts as the transcriptions' (logits), so the question shares their session.
          const asked = await rec.ask('What is said?', { ...options, probe: { onLogits: () => {} } });
          expect(asked.error).toBeUndefined();
          const second = await logged(
            heads,
            () => N,
            (o) => rec.transcribe(o),
            options,
          );
          const afterAudio = rec.lastPrompt!.afterAudio.length;
          const fresh = await t.open(bytes);
          const alone = await logged(
            heads,
            () => N,
            (o) => fresh.transcribe(o),
            options,
          );
          const what = `${family} ${spec.policy}`;
          expect(first.r.tokens.length, what).toBe(MAX_NEW);
          expect(second.r.tokens, what).toEqual(first.r.tokens);
          expect(alone.r.tokens, what).toEqual(first.r.tokens);
          expect(worstLogit(first.logits, second.logits), what).toBeLessThan(1e-4);
          expect(worstLogit(alone.logits, second.logits), what).toBeLessThan(1e-4);
          expect(second.heldAtStart, what).toEqual(first.heldAtStart);
          expect(alone.heldAtStart, what).toEqual(first.heldAtStart);
          // What the second transcription reused: the audio where the question's placement dropped
          // nothing (its instruction fed again), none where it dropped (the audio placed again).
          const dropped = spec.policy === 'wnw' || spec.policy === 'snapkv';
          expect(second.r.stats.prompt, what).toEqual(
            dropped
              ? { reusedPositions: 0, prefilledPositions: c.prefix.length + N + afterAudio }
              : { reusedPositions: c.prefix.length + N, prefilledPositions: afterAudio },
          );
          fresh.dispose();
        }
      } finally {
        t.dispose();
      }
    }, 180_000);
  }
});
