/**
 * A recording through the worker (client.ts ⇄ worker.ts, the real worker module run in this
 * process behind a structured-clone channel), on the reference model: its requests reuse
 * the audio's KV there as they do on the page's thread.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { loadTranscriberInWorker } from '../../src/worker/client.js';
import type { Transcriber } from '../../src/types.js';
import { inProcessWorker } from '../helpers/in-process-worker.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');

describe('a recording through the worker', () => {
  let asr: Transcriber;
  let samples: Float32Array;
  beforeAll(async () => {
    asr = await loadTranscriberInWorker({ model: MODEL, backend: 'cpu', policy: 'full' }, await inProcessWorker());
    samples = await toMono16k(new Uint8Array(readFileSync(join(MODEL, 'fixtures', 'clip1.wav'))));
  }, 120_000);
  afterAll(() => asr?.dispose());

  it('opens once, reuses the audio for its next request, writes subtitles, and refuses calls after dispose', async () => {
    const fresh = await asr.transcribe(samples, { maxNewTokens: 20 });
    const rec = await asr.open(samples);
    expect(rec.can).toEqual({ ask: false, translate: false });
    expect(rec.audioSeconds).toBeCloseTo(samples.length / 16000, 6);
    const first = await rec.transcribe({ maxNewTokens: 20 });
    const tokens: string[] = [];
    const second = await rec.transcribe({ maxNewTokens: 20, onToken: (t) => void tokens.push(t) });
    expect(first.tokens).toEqual(fresh.tokens);
    expect(second.tokens).toEqual(fresh.tokens);
    expect(tokens.join('').trim()).toBe(second.text);
    expect(second.stats.prompt.reusedPositions).toBeGreaterThan(0);
    expect(second.stats.timing.encodeMs).toBe(0);
    const srt = await rec.subtitles('srt', { maxNewTokens: 20 });
    expect(srt).toMatch(/^1\r?\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\r?\n/);
    // Given the result, the page cuts the same cues itself.
    expect(await rec.subtitles('srt', second)).toBe(srt);
    await expect(rec.ask('what is said?')).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    rec.dispose();
    await expect(rec.transcribe()).rejects.toThrow(/disposed/);
  }, 120_000);
});
