/**
 * `Transcriber.calibrate` on the shipped reference model (CPU backend): the heads it makes
 * are the CPU reference's own for the same clips, WnW runs with them at once, a
 * transcription asked for meanwhile runs between clips (never after the whole triage), a
 * stop ends between clips with CANCELLED, and bad clips are refused before any work.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { loadModel } from '../../src/model/loader.js';
import { createAudioRoute } from '../../src/route/audio-route.js';
import { calibrateClips } from '../../src/calibrate/runtime.js';
import { clipSources } from '../../src/transcribe/calibrate.js';
import { defaultModelDir } from '../../src/cli/args.js';
import { CancelledError, WnwError } from '../../src/errors.js';
import type { CalibrationClip } from '../../src/types.js';

const DATA = 'calibration-data';

function clip(id: string): CalibrationClip {
  const j = JSON.parse(readFileSync(join(DATA, `${id}.json`), 'utf8'));
  return {
    id,
    text: j.text,
    words: j.words,
    tokens: j.tokens,
    audio: new Uint8Array(readFileSync(join(DATA, `${id}.wav`))),
  };
}

describe('Transcriber.calibrate on the reference model', () => {
  let asr: WnwTranscriber;
  const clips = ['calib001', 'calib002', 'calib003'].map(clip);
  beforeAll(async () => {
    asr = await loadTranscriber({ model: defaultModelDir(), backend: 'cpu', policy: 'full' });
    // A model loaded without its heads, as a downloaded folder comes.
    asr.model.heads = undefined;
  }, 120_000);

  it('bad clips are refused before any work', async () => {
    await expect(asr.calibrate([])).rejects.toThrow(WnwError);
    await expect(asr.calibrate([{ ...clips[0], words: [{ word: 'x', start: 2, end: 1 }] }])).rejects.toThrow(
      /word ending before it starts/,
    );
    await expect(asr.calibrate([clips[0], clips[0]])).rejects.toThrow(/two clips are named "calib001"/);
  });

  it('a stop ends between clips with CANCELLED', async () => {
    const stop = new AbortController();
    const done: string[] = [];
    await expect(
      asr.calibrate(clips, {
        signal: stop.signal,
        onProgress: (p) => p.finished && (done.push(p.id), stop.abort()),
      }),
    ).rejects.toThrow(CancelledError);
    expect(done).toEqual(['calib001']);
    expect(asr.modelInfo.heads).toBe(false);
  });

  it("writes the CPU reference's heads, lets a transcription run between its clips, and WnW runs with them at once", async () => {
    const order: string[] = [];
    const triage = asr.calibrate(clips, { onProgress: (p) => p.finished && order.push(p.id) });
    // Asked for while the first clip is under way: it runs before the last clip.
    const text = asr.transcribe(clips[0].audio as Uint8Array).then((r) => (order.push('transcribe'), r));
    const [cal, r] = await Promise.all([triage, text]);
    expect(r.stats.policy).toBe('full');
    expect(order.indexOf('transcribe')).toBeLessThan(order.indexOf('calib003'));
    expect(cal.stored).toBe(false);
    expect(cal.heads.sensitivityEstimator).toBe('answer-path');
    expect(asr.modelInfo.heads).toBe(true);
    // The same clips through the runtime on the CPU reference, without a transcriber.
    const model = await loadModel(defaultModelDir());
    const route = await createAudioRoute(model, { file: join(defaultModelDir(), 'encoder.onnx') });
    try {
      const ref = await calibrateClips(model, (s) => route.encode(s), clipSources(clips), { estimator: 'answer-path' });
      expect(cal.heads).toEqual(ref);
    } finally {
      await route.dispose();
    }
    const wnw = await asr.transcribe(clips[1].audio as Uint8Array, { policy: 'wnw', budget: 0.2 });
    expect(wnw.stats.policy).toBe('wnw');
    expect(wnw.error).toBeUndefined();
  }, 120_000);
});
