/**
 * A live recording through the worker (client.ts ⇄ worker.ts, the real worker module run in
 * this process), on the reference model: the same ticks, texts and result as the page's
 * thread gives, its recording open for requests there, and its errors typed on the page.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toMono16k } from '../../src/audio/decode.js';
import { WnwError } from '../../src/errors.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import type { LiveText } from '../../src/transcribe/live.js';
import { loadTranscriberInWorker } from '../../src/worker/client.js';
import type { LiveRecording, Transcriber } from '../../src/types.js';
import { inProcessWorker } from '../helpers/in-process-worker.js';

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');
const CHUNK = 8000;

/** Appends the clip half a second at a time, each append waited for (the same ticks on any machine), then stops. */
async function feed(live: LiveRecording, samples: Float32Array) {
  for (let i = 0; i < samples.length; i += CHUNK) await live.append(samples.subarray(i, i + CHUNK));
  expect(live.audioSeconds).toBeCloseTo(samples.length / 16000, 6);
  return live.stop();
}

// The tick's own fields (LiveText may gain timings) differ from run to run: the texts are compared.
const shown = (texts: LiveText[]) => texts.map(({ committed, tentative }) => ({ committed, tentative }));

describe('a live recording through the worker', () => {
  let asr: Transcriber;
  let here: WnwTranscriber;
  let samples: Float32Array;
  beforeAll(async () => {
    const options = { model: MODEL, backend: 'cpu', policy: 'full' } as const;
    asr = await loadTranscriberInWorker(options, await inProcessWorker());
    here = await loadTranscriber(options);
    samples = await toMono16k(new Uint8Array(readFileSync(join(MODEL, 'fixtures', 'clip1.wav'))));
  }, 120_000);
  afterAll(() => (asr?.dispose(), here?.dispose()));

  it('gives the texts and result of the in-thread live recording; its recording stays open for subtitles and requests', async () => {
    const texts: LiveText[] = [];
    const got = await feed(asr.live({ tickSeconds: 2, onText: (t) => void texts.push(t) }), samples);
    const wanted: LiveText[] = [];
    const want = await feed(here.live({ tickSeconds: 2, onText: (t) => void wanted.push(t) }), samples);
    want.recording!.dispose();

    expect(got.text.length).toBeGreaterThan(0);
    expect(got.text).toBe(want.text);
    expect(got.tokens).toEqual(want.tokens);
    expect(got.latencies).toEqual(want.latencies);
    expect(got.stats.ticks).toBe(want.stats.ticks);
    expect(got.stats.audioSeconds).toBeCloseTo(samples.length / 16000, 6);
    expect(shown(texts)).toEqual(shown(wanted));
    expect(texts.length).toBe(got.stats.ticks);
    expect(texts.at(-1)).toMatchObject({ committed: got.text, tentative: '' });

    const rec = got.recording!;
    expect(rec.audioSeconds).toBeCloseTo(samples.length / 16000, 6);
    expect(rec.can).toEqual({ ask: false, translate: false });
    const srt = await rec.subtitles('srt', { maxNewTokens: 20 });
    expect(srt).toMatch(/^1\r?\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\r?\n/);
    // The audio was encoded when the live recording stopped: a request reuses its KV, encoding nothing.
    const again = await rec.transcribe({ maxNewTokens: 20 });
    expect(again.text.length).toBeGreaterThan(0);
    expect(again.stats.prompt.reusedPositions).toBeGreaterThan(0);
    expect(again.stats.timing.encodeMs).toBe(0);
    rec.dispose();
  }, 240_000);

  it("refuses bad options with the worker's typed error, at the first append and at stop", async () => {
    const live = asr.live({ tickSeconds: 0 });
    const err = await live.append(new Float32Array(160)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect(err).toMatchObject({
      code: 'BAD_ARGUMENT',
      message: expect.stringMatching(/tickSeconds must be a positive/),
    });
    await expect(live.stop()).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
    const unknown = asr.live({ policy: 'nope' as never });
    await expect(unknown.stop()).rejects.toMatchObject({ code: 'BAD_ARGUMENT' });
  });

  it('refuses appends after stop, a second stop, and audio that is not a Float32Array', async () => {
    const live = asr.live({ tickSeconds: 2 });
    await expect(live.append([0.1, 0.2] as never)).rejects.toThrow(/append takes a Float32Array/);
    await live.append(samples.subarray(0, CHUNK));
    const done = await live.stop();
    expect(done.stats.ticks).toBe(1);
    done.recording!.dispose();
    await expect(live.append(samples.subarray(0, CHUNK))).rejects.toThrow(/this live recording was stopped/);
    await expect(live.stop()).rejects.toThrow(/stopped already/);
  }, 60_000);
});
