/**
 * A conversation on one recording of each Hugging Face family's miniature (full cache): a
 * transcription, a question and a follow-up question. Each request's whole prompt must be
 * the one training/hf/prompts.py builds from the upstream rules (mistral-common's instruct
 * encoding, the folder's chat template with the answer's ids spliced in), and its answer
 * and logits those of that whole prompt prefilled fresh.
 */
import { spawnSync } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import type { WnwRecording } from '../../src/transcribe/recording.js';
import type { RequestOptions, TranscriptionResult } from '../../src/types.js';
import type { KvPolicy } from '../../src/policy/types.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { createPolicy } from '../../src/policy/registry.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { isStop } from '../../src/model/config.js';
import { ensureMiniatures, MINIATURE_FAMILIES } from '../helpers/miniatures.js';
import { hasJinja2 } from './tokenizer-fixtures.js';
import { runCliCaptured } from '../helpers/cli.js';

const MAX_NEW = 5;

/** Each request's whole prompt ids from the Python reference, given the answers the run gave. */
function referenceTurns(dir: string, family: string, n: number, requests: object[]): number[][] {
  const r = spawnSync(
    '/usr/bin/python3',
    [resolve('training/hf/prompts.py'), 'turns', dir, family, String(n), JSON.stringify(requests)],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`prompts.py turns failed: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { ids: number[] }).ids);
}

/** A request of MAX_NEW tokens on `rec`, with the logits of every step and the whole prompt it ran. */
async function logged(
  rec: WnwRecording,
  run: (o: RequestOptions) => Promise<TranscriptionResult>,
): Promise<{ r: TranscriptionResult; logits: Float32Array[]; prompt: NonNullable<WnwRecording['lastPrompt']> }> {
  const logits: Float32Array[] = [];
  const r = await run({
    maxNewTokens: MAX_NEW,
    probe: { onLogits: (_: number, l: Float32Array) => void logits.push(l.slice()) },
  });
  expect(r.error).toBeUndefined();
  return { r, logits, prompt: rec.lastPrompt! };
}

/**
 * A recording's request against its whole prompt prefilled fresh under `policy`, then fed
 * the answer: the same tokens, and logits within 1e-4.
 */
async function expectFresh(
  t: WnwTranscriber,
  rec: WnwRecording,
  run: { r: TranscriptionResult; logits: Float32Array[]; prompt: NonNullable<WnwRecording['lastPrompt']> },
  policy: KvPolicy,
): Promise<void> {
  const { r, logits, prompt } = run;
  const c = t.model.config;
  const N = rec.encoding.audioLength;
  const be = new CpuBackend(c, t.model.weights);
  const whole = { prefix: prompt.prefix, instruction: prompt.afterAudio };
  const pre = await be
    .open({
      audioLength: N,
      maxNewTokens: MAX_NEW + 1,
      request: policy.request(policyLayout(c, N, whole)),
      prompt: whole,
      returnLogits: true,
    })
    .prefill(rec.encoding.embeddings);
  const s = await pre.place(policy.prefill(pre.observation));
  const fresh = [pre.token];
  let worst = 0;
  // The recording read the logits of every step it fed an answer token to (all but a last one the length guard kept).
  expect(logits.length).toBe(r.stats.stoppedBy === 'eos' ? r.tokens.length : r.tokens.length - 1);
  for (let i = 0; i < logits.length; i++) {
    const step = await s.step(r.tokens[i]);
    step.logits!.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - logits[i][j]))));
    fresh.push(step.token);
  }
  s.close();
  be.dispose();
  const stop = fresh.findIndex((id) => isStop(c, id));
  expect(stop === -1 ? fresh.slice(0, r.tokens.length) : fresh.slice(0, stop)).toEqual(r.tokens);
  expect(worst).toBeLessThan(1e-4);
}

describe('a conversation on one recording, per family', () => {
  let models = '';
  let tmp = '';
  let bytes = new Uint8Array(0);
  let wav = '';
  beforeAll(async () => {
    models = await ensureMiniatures();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-recording-'));
    wav = join(tmp, 'clip.wav');
    execFileSync('espeak-ng', ['-w', wav, 'the quick brown fox jumps over the lazy dog'], { stdio: 'ignore' });
    bytes = new Uint8Array(readFileSync(wav));
  }, 180_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: transcription, question and follow-up equal each whole prompt prefilled fresh`, async () => {
      // The Qwen references render the chat template with jinja2 (python3-jinja2, which npm test installs).
      expect(hasJinja2()).toBe(true);
      const dir = join(models, family);
      const t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
      try {
        const rec = await t.open(bytes);
        const N = rec.encoding.audioLength;
        const c = t.model.config;
        const turns: { req: Record<string, unknown>; run: (o: object) => ReturnType<typeof rec.transcribe> }[] = [
          { req: { task: 'transcribe' }, run: (o) => rec.transcribe(o) },
          { req: { task: 'ask', question: 'What is said?' }, run: (o) => rec.ask('What is said?', o) },
          { req: { task: 'ask', question: 'Who says it?' }, run: (o) => rec.ask('Who says it?', o) },
          { req: { task: 'transcribe' }, run: (o) => rec.transcribe(o) },
        ];
        const runs = [];
        for (const turn of turns) {
          const run = await logged(rec, turn.run);
          runs.push({ ...run, req: { ...turn.req, answer: run.r.tokens } });
        }
        // Only the first request prefilled the audio; the follow-up reused the conversation before it.
        expect(runs[0].r.stats.prompt.reusedPositions).toBe(0);
        expect(runs[1].r.stats.prompt.reusedPositions).toBe(c.prefix.length + N);
        expect(runs[2].r.stats.prompt.reusedPositions).toBeGreaterThan(c.prefix.length + N);
        // The questions wrote over the first transcription's rows after the audio: the second feeds its instruction again.
        expect(runs[3].r.stats.prompt).toEqual({
          reusedPositions: c.prefix.length + N,
          prefilledPositions: runs[3].prompt.afterAudio.length,
        });

        const reference = referenceTurns(
          dir,
          family,
          N,
          runs.map((x) => x.req),
        );
        const audioId = reference[0][c.prefix.length];
        for (let k = 0; k < runs.length; k++) {
          const { prompt } = runs[k];
          expect([...prompt.prefix, ...new Array<number>(N).fill(audioId), ...prompt.afterAudio]).toEqual(reference[k]);
          await expectFresh(t, rec, runs[k], createPolicy('full', { budget: 1 }));
        }
        rec.dispose();
      } finally {
        t.dispose();
      }
    }, 180_000);
  }

  it('a policy that dropped audio for one prompt places it again for another, and equals it prefilled fresh', async () => {
    // SnapKV keeps each head's top positions for the prompt's last rows and no copy of the rest.
    const spec = { policy: 'snapkv' as const, budget: 0.3 };
    const t = await loadTranscriber({ model: join(models, 'voxtral'), backend: 'cpu', ...spec });
    try {
      const rec = await t.open(bytes);
      const audioEnd = t.model.config.prefix.length + rec.encoding.audioLength;
      const turns: ((o: RequestOptions) => Promise<TranscriptionResult>)[] = [
        (o) => rec.transcribe(o),
        (o) => rec.ask('What is said?', o),
        (o) => rec.ask('Who says it?', o),
        (o) => rec.transcribe(o),
        (o) => rec.transcribe(o),
      ];
      const runs = [];
      for (const turn of turns) runs.push(await logged(rec, turn));
      // Each request with other ids after the audio than the placement's prefilled its whole prompt again.
      for (const k of [0, 1, 2, 3]) {
        expect(runs[k].r.stats.prompt.reusedPositions).toBe(0);
        expect(runs[k].r.stats.prompt.prefilledPositions).toBe(audioEnd + runs[k].prompt.afterAudio.length);
      }
      // The follow-up's prompt still holds the conversation before it.
      expect(runs[2].prompt.afterAudio.length).toBeGreaterThan(runs[1].prompt.afterAudio.length);
      // The same transcription again reuses its whole prompt: the placement, and the rows after the audio, a fresh run makes.
      expect(runs[4].r.stats.prompt).toEqual({
        reusedPositions: audioEnd + runs[4].prompt.afterAudio.length,
        prefilledPositions: 0,
      });
      expect(runs[4].r.tokens).toEqual(runs[3].r.tokens);
      for (const run of runs) await expectFresh(t, rec, run, createPolicy(spec.policy, { budget: spec.budget }));
      rec.dispose();
    } finally {
      t.dispose();
    }
  }, 120_000);

  it("a follow-up past the model's positions is a CONTEXT_TOO_LONG naming what remains, and the recording goes on", async () => {
    // Qwen2-Audio's miniature has 8,192 positions.
    const t = await loadTranscriber({ model: join(models, 'qwen2_audio'), backend: 'cpu', policy: 'full' });
    try {
      const rec = await t.open(bytes);
      await rec.ask('What is said?', { maxNewTokens: 3 });
      const long = 'and then '.repeat(4000);
      const e = await rec.ask(long).catch((x: unknown) => x);
      expect(e).toMatchObject({ code: 'CONTEXT_TOO_LONG' });
      expect((e as Error).message).toMatch(/\d+ remain of the model's 8192: ask it with \{ fresh: true \}/);
      const next = await rec.ask('Who says it?', { maxNewTokens: 3 });
      expect(next.error).toBeUndefined();
      expect(next.stats.prompt.reusedPositions).toBeGreaterThan(0);
      rec.dispose();
    } finally {
      t.dispose();
    }
  }, 120_000);

  it('wnw ask: the questions in one conversation, with what each request reused and prefilled', async () => {
    const dir = join(models, 'voxtral');
    const questions = ['What is said?', 'Who says it?'];
    const r = await runCliCaptured([
      'ask',
      wav,
      ...questions,
      '--model',
      dir,
      '--backend',
      'cpu',
      '--policy',
      'full',
      '--json',
    ]);
    expect(r.err).not.toMatch(/wnw: (?!backend|\d+ tokens)/);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out) as {
      requests: {
        kind: string;
        question: string;
        text: string;
        reusedPositions: number;
        prefilledPositions: number;
        ms: number;
      }[];
      stats: { policy: string };
    };
    expect(out.requests.map((q) => [q.kind, q.question])).toEqual(questions.map((q) => ['ask', q]));
    const [first, second] = out.requests;
    expect(first.reusedPositions).toBe(0);
    // The follow-up reused the first request's whole prompt and the answer's tokens written after it.
    expect(second.reusedPositions).toBeGreaterThanOrEqual(first.prefilledPositions);
    expect(second.prefilledPositions).toBeLessThan(20);
    for (const q of out.requests) expect(q.ms).toBeGreaterThan(0);
    expect(out.stats.policy).toBe('full');
    // A model whose prompt is for transcription only says so.
    const ref = await runCliCaptured(['ask', wav, 'What is said?', '--backend', 'cpu', '--policy', 'full']);
    expect(ref.code).toBe(1);
    expect(ref.err).toMatch(/takes no questions \(its prompt is for transcription only\)/);
  }, 120_000);
});
