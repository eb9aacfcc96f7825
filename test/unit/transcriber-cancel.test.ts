/**
 * Cancelling a transcription at each phase that runs in-process on the CPU backend:
 * encode (between windows), prefill (between layers), decode (between steps). Each ends
 * with a CancelledError and what was decoded by then, and the next transcription on the
 * same transcriber gives what a fresh transcriber gives.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { CancelledError } from '../../src/errors.js';
import type { ProgressEvent, TranscribeOptions, TranscriptionResult } from '../../src/types.js';
import { pythonHasOnnx, toneWav, writeTinyModel } from '../helpers/tiny-model.js';

const LAYERS = 4;
// 20 s is 2000 mel frames: two encoder windows of the tiny model (1600 frames each at most).
const CLIP = toneWav(20);
const OPTS: TranscribeOptions = { policy: 'wnw', budget: 0.2, maxNewTokens: 12 };

describe.skipIf(!pythonHasOnnx())('cancel at every in-process phase (CPU backend)', () => {
  let dir: string;
  let asr: WnwTranscriber;
  let fresh: TranscriptionResult;
  beforeAll(async () => {
    dir = writeTinyModel({ layers: LAYERS });
    const first = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'wnw', budget: 0.2 });
    fresh = await first.transcribe(CLIP, OPTS);
    first.dispose();
    asr = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'wnw', budget: 0.2 });
  });

  /** The next transcription on the same transcriber is the fresh transcriber's. */
  async function nextIsFresh(): Promise<void> {
    const r = await asr.transcribe(CLIP, OPTS);
    expect(r.error).toBeUndefined();
    expect(r.tokens).toEqual(fresh.tokens);
    expect(r.text).toBe(fresh.text);
    expect(r.stats.decodeSteps).toBe(fresh.stats.decodeSteps);
  }

  /** A transcription of the clip whose callbacks, made by `hooks`, may cancel it with `abort`. */
  function cancellable(hooks: (abort: () => void) => TranscribeOptions): Promise<TranscriptionResult> {
    const ac = new AbortController();
    return asr.transcribe(CLIP, { ...OPTS, signal: ac.signal, ...hooks(() => ac.abort()) });
  }

  it('the uncancelled run decodes to the length guard', () => {
    expect(fresh.error).toBeUndefined();
    expect(fresh.stats.stoppedBy).toBe('length-guard');
    expect(fresh.tokens.length).toBe(12);
    expect(fresh.text.length).toBeGreaterThan(0);
  });

  it('encode: a cancel before the first window rejects with a CancelledError', async () => {
    const phases: ProgressEvent[] = [];
    const p = cancellable((abort) => ({
      onProgress: (e) => {
        phases.push(e);
        if (e.phase === 'encode' && e.fraction === 0) abort();
      },
    }));
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    await expect(p).rejects.toMatchObject({ phase: 'encode', text: '' });
    expect(phases.every((e) => e.phase === 'encode' && e.fraction === 0)).toBe(true);
    await nextIsFresh();
  });

  it('encode: a cancel between windows stops before the second window', async () => {
    const fractions: number[] = [];
    const p = cancellable((abort) => ({
      onProgress: (e) => {
        if (e.phase !== 'encode') throw new Error(`phase ${e.phase} after the cancel`);
        fractions.push(e.fraction);
        if (e.fraction > 0) abort();
      },
    }));
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(fractions).toEqual([0, 0.5]);
    await nextIsFresh();
  });

  for (const k of [1, 2, LAYERS]) {
    it(`prefill: a cancel after layer ${k} of ${LAYERS} stops the prefill there, with nothing decoded`, async () => {
      const layers: string[] = [];
      let tokens = 0;
      let steps = 0;
      const r = await cancellable((abort) => ({
        onToken: () => void tokens++,
        onStep: () => void steps++,
        onProgress: (e) => {
          if (e.phase === 'decode') throw new Error('decode after the cancel');
          if (e.phase !== 'prefill' || !e.detail) return;
          layers.push(e.detail);
          if (e.detail === `layer ${k} of ${LAYERS}`) abort();
        },
      }));
      expect(r.error).toBeInstanceOf(CancelledError);
      expect(r.stats.stoppedBy).toBe('cancelled');
      expect(layers).toEqual(Array.from({ length: k }, (_, i) => `layer ${i + 1} of ${LAYERS}`));
      expect(r.text).toBe('');
      expect((r.error as CancelledError).phase).toBe('prefill');
      expect(r.tokens).toEqual([]);
      expect(r.stats.decodeSteps).toBe(0);
      expect(tokens + steps).toBe(0);
      await nextIsFresh();
    });
  }

  it('prefill: a cancel at its start (before layer 1) decodes nothing', async () => {
    const r = await cancellable((abort) => ({
      onProgress: (e) => {
        if (e.phase === 'prefill' && e.fraction === 0) abort();
        else if (e.phase === 'prefill') throw new Error(`prefill ran on: ${e.detail ?? e.fraction}`);
      },
    }));
    expect(r.error).toBeInstanceOf(CancelledError);
    expect(r.tokens).toEqual([]);
    expect(r.text).toBe('');
    await nextIsFresh();
  });

  for (const s of [0, 4]) {
    it(`decode: a cancel at step ${s} returns the text decoded so far`, async () => {
      const seen: number[] = [];
      let textAtCancel = '';
      const r = await cancellable((abort) => ({
        onStep: (st) => {
          seen.push(st.step);
          if (st.step === s) {
            textAtCancel = st.text;
            abort();
          }
        },
      }));
      expect(r.error).toBeInstanceOf(CancelledError);
      expect(r.stats.stoppedBy).toBe('cancelled');
      expect(seen).toEqual(Array.from({ length: s + 1 }, (_, i) => i));
      expect(r.stats.decodeSteps).toBe(s + 1);
      // The prefill's token and one per step run: the fresh run's first tokens.
      expect(r.tokens).toEqual(fresh.tokens.slice(0, s + 2));
      expect(r.text.length).toBeGreaterThan(0);
      expect(fresh.text.startsWith(r.text)).toBe(true);
      expect(r.text.startsWith(textAtCancel.trim())).toBe(true);
      // The error carries the same partial transcript, and says where it stopped.
      expect((r.error as CancelledError).text).toBe(r.text);
      expect((r.error as CancelledError).phase).toBe('decode');
      await nextIsFresh();
    });
  }

  for (const phase of ['download', 'convert'] as const) {
    it(`load: a cancel at the first ${phase} event rejects with a CancelledError naming it`, async () => {
      const ac = new AbortController();
      const after: ProgressEvent[] = [];
      let fired = false;
      const p = loadTranscriber({
        model: dir,
        backend: 'cpu',
        policy: 'wnw',
        budget: 0.2,
        weightFormat: 'f16',
        signal: ac.signal,
        onProgress: (e) => {
          if (fired) after.push(e);
          else if (e.phase === phase) ((fired = true), ac.abort());
        },
      });
      await expect(p).rejects.toBeInstanceOf(CancelledError);
      await expect(p).rejects.toMatchObject({ phase, text: '' });
      expect(fired).toBe(true);
      // Nothing reported once the cancel is in: the load stopped at that event.
      expect(after).toEqual([]);
    });
  }

  it('load: an already aborted signal refuses before anything is read', async () => {
    const events: ProgressEvent[] = [];
    const p = loadTranscriber({
      model: dir,
      backend: 'cpu',
      signal: AbortSignal.abort(),
      onProgress: (e) => void events.push(e),
    });
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(events).toEqual([]);
  });
});
