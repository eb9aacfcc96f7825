/**
 * One recording, many requests, on the shipped reference model (CPU backend): a later
 * request reuses the audio's KV and prefills only its own ids, and gives what a fresh
 * transcription gives.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { promptLength } from '../../src/model/config.js';
import { CancelledError, WnwError } from '../../src/errors.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');
const CLIP = join(MODEL, 'fixtures', 'clip1.wav');

describe('a recording on the reference model', () => {
  let asr: WnwTranscriber;
  let samples: Float32Array;
  beforeAll(async () => {
    asr = await loadTranscriber({ model: MODEL, backend: 'cpu', policy: 'full' });
    samples = await toMono16k(new Uint8Array(readFileSync(CLIP)));
  }, 120_000);
  afterAll(() => asr?.dispose());

  it('gives a second transcription token for token as a fresh one, with no encoding and no audio prefill', async () => {
    const logits: Float32Array[][] = [[], [], []];
    const probe = (i: number) => ({ onLogits: (_: number, l: Float32Array) => void logits[i].push(l.slice()) });
    const fresh = await asr.transcribe(samples, { probe: probe(0) });
    const rec = await asr.open(samples);
    const first = await rec.transcribe({ probe: probe(1) });
    const second = await rec.transcribe({ probe: probe(2) });
    const c = asr.model.config;
    const N = second.stats.audioTokens;
    expect(fresh.tokens.length).toBeGreaterThan(10);
    expect(first.tokens).toEqual(fresh.tokens);
    expect(second.tokens).toEqual(fresh.tokens);
    expect(second.text).toBe(fresh.text);
    // The first request prefilled the whole prompt and tells the encode; the second reused the audio.
    expect(first.stats.prompt).toEqual({ reusedPositions: 0, prefilledPositions: promptLength(c, N) });
    expect(first.stats.timing.encodeMs).toBeGreaterThan(0);
    // The same prompt again: the prefill's rows after the audio, and the token they predicted, are kept too.
    expect(second.stats.prompt).toEqual({ reusedPositions: promptLength(c, N), prefilledPositions: 0 });
    expect(second.stats.timing.encodeMs).toBe(0);
    expect(logits[2].length).toBe(logits[0].length);
    let worst = 0;
    logits[0].forEach((l, s) => l.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - logits[2][s][j])))));
    expect(worst).toBeLessThan(1e-4);
    rec.dispose();
  });

  it('keeps its GPU bytes flat over many requests', async () => {
    const rec = await asr.open(samples);
    const bytes: number[] = [];
    // A request that draws the tide chart (onStep) and one that does not share the session.
    const charted = await rec.transcribe({ maxNewTokens: 40, onStep: () => {} });
    bytes.push(charted.stats.kv.gpuKvBytes);
    for (let i = 1; i < 6; i++) {
      const r = await rec.transcribe({ maxNewTokens: 40 });
      expect(r.stats.prompt.reusedPositions).toBeGreaterThan(0);
      bytes.push(r.stats.kv.gpuKvBytes);
    }
    for (const b of bytes.slice(2)) expect(Math.abs(b - bytes[1]) / bytes[1]).toBeLessThanOrEqual(0.01);
    rec.dispose();
  });

  it('prefills again from its encoding for another policy, and after a transcription ran in between', async () => {
    const rec = await asr.open(samples);
    const full = await rec.transcribe({ maxNewTokens: 30 });
    const streaming = await rec.transcribe({ policy: 'streaming', budget: 0.5, maxNewTokens: 30 });
    expect(streaming.stats.prompt.reusedPositions).toBe(0);
    expect(streaming.stats.timing.encodeMs).toBe(0);
    expect(streaming.stats.policy).toBe('streaming');
    // A plain transcription takes the backend's session: the recording prefills again, to the same tokens.
    await asr.transcribe(samples, { maxNewTokens: 5 });
    const again = await rec.transcribe({ maxNewTokens: 30 });
    expect(again.stats.prompt.reusedPositions).toBe(0);
    expect(again.tokens).toEqual(full.tokens);
    rec.dispose();
  });

  it('returns what a cancelled request decoded, and answers the next one', async () => {
    const rec = await asr.open(samples);
    const whole = await rec.transcribe({ maxNewTokens: 30 });
    const abort = new AbortController();
    let n = 0;
    const cut = await rec.transcribe({
      maxNewTokens: 30,
      signal: abort.signal,
      onToken: () => void (++n === 4 && abort.abort()),
    });
    expect(cut.error).toBeInstanceOf(CancelledError);
    expect(cut.tokens.length).toBeGreaterThanOrEqual(4);
    expect(whole.tokens.slice(0, cut.tokens.length)).toEqual(cut.tokens);
    const next = await rec.transcribe({ maxNewTokens: 30 });
    expect(next.tokens).toEqual(whole.tokens);
    expect(next.stats.prompt.reusedPositions).toBeGreaterThan(0);
    rec.dispose();
  });

  it('refuses a question on a model that only transcribes, and calls after dispose or a new open', async () => {
    const rec = await asr.open(samples);
    const refused = await rec.ask('what is said?').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WnwError);
    expect((refused as WnwError).code).toBe('BAD_ARGUMENT');
    expect((refused as Error).message).toMatch(/no questions .*transcription only/);
    await expect(rec.transcribe({ task: 'translate' } as never)).rejects.toThrow(/names the task by its method/);
    const other = await asr.open(samples.subarray(0, 16000 * 3));
    await expect(rec.transcribe()).rejects.toThrow(/opened another/);
    other.dispose();
    await expect(other.transcribe()).rejects.toThrow(/disposed/);
  });
});
