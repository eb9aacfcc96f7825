/**
 * A cancel's and a lost device's typed errors cross the worker boundary with their class,
 * the text decoded so far, the phase and the reason (protocol.ts ⇄ client.ts); a probe's
 * data crosses it, its hooks (functions) are refused on the page.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, DeviceLostError, ModelLoadError, WnwError } from '../../src/errors.js';
import { serializeError, type FromWorker, type ToWorker } from '../../src/worker/protocol.js';
import { deserializeError, loadTranscriberInWorker } from '../../src/worker/client.js';
import type { TranscriptionStats } from '../../src/types.js';
import { FAKE_MODEL_INFO } from '../helpers/fake-transcriber.js';

const roundTrip = (e: Error) => deserializeError(JSON.parse(JSON.stringify(serializeError(e))));

describe('typed errors through the worker protocol', () => {
  it('a CancelledError keeps its class, partial text and phase', () => {
    const e = roundTrip(new CancelledError('the cat sat', 'decode'));
    expect(e).toBeInstanceOf(CancelledError);
    expect(e).toMatchObject({
      code: 'CANCELLED',
      text: 'the cat sat',
      phase: 'decode',
      message: 'Cancelled during decode.',
    });
  });

  it('a DeviceLostError keeps its class, reason and partial text', () => {
    const e = roundTrip(new DeviceLostError('destroyed: Device was destroyed.', 'the cat'));
    expect(e).toBeInstanceOf(DeviceLostError);
    expect(e).toMatchObject({ code: 'DEVICE_LOST', text: 'the cat', reason: 'destroyed: Device was destroyed.' });
    expect(e.message).toBe(new DeviceLostError('destroyed: Device was destroyed.').message);
  });

  it('a load cancel (no text) and other typed errors keep their fields', () => {
    expect(roundTrip(new CancelledError('', 'upload'))).toMatchObject({ text: '', phase: 'upload' });
    const m = roundTrip(new ModelLoadError('m/config.json', 'is not JSON'));
    expect(m).toMatchObject({ code: 'MODEL_LOAD', file: 'm/config.json', message: 'm/config.json: is not JSON' });
  });
});

/** A worker that loads at once and answers each transcribe with an empty result, keeping what it was sent. */
function fakeWorker(sent: ToWorker[]): () => Worker {
  return () => {
    const listeners: ((e: MessageEvent<FromWorker>) => void)[] = [];
    const reply = (data: FromWorker) => queueMicrotask(() => listeners.forEach((l) => l({ data } as MessageEvent)));
    return {
      addEventListener: (type: string, l: (e: MessageEvent<FromWorker>) => void) =>
        void (type === 'message' && listeners.push(l)),
      terminate() {},
      postMessage(m: ToWorker) {
        // What a real postMessage does first: a function anywhere in the message is a DataCloneError.
        sent.push(structuredClone(m));
        if (m.type === 'load')
          reply({ type: 'loaded', id: m.id, backend: 'fake', backendReason: null, modelInfo: FAKE_MODEL_INFO });
        if (m.type === 'transcribe')
          reply({
            type: 'result',
            id: m.id,
            result: { text: '', rawText: '', words: [], tokens: [], stats: {} as TranscriptionStats },
          });
      },
    } as unknown as Worker;
  };
}

describe('a probe through the worker client', () => {
  it('forwards its data (forced tokens, prefill reuse) to the worker', async () => {
    const sent: ToWorker[] = [];
    const t = await loadTranscriberInWorker({ model: 'm' }, fakeWorker(sent));
    await t.transcribe(new Float32Array(16), { policy: 'full', probe: { forcedTokens: [1, 2], reusePrefill: true } });
    const m = sent.find((s) => s.type === 'transcribe');
    expect(m).toMatchObject({ options: { policy: 'full', probe: { forcedTokens: [1, 2], reusePrefill: true } } });
  });

  it('refuses a hook with a BAD_ARGUMENT that points to the in-thread transcriber, and posts nothing', async () => {
    const sent: ToWorker[] = [];
    const t = await loadTranscriberInWorker({ model: 'm' }, fakeWorker(sent));
    for (const probe of [
      { onLogits: () => {} },
      { forcedTokens: [1], onAttention: () => {} },
      { reusePrefill: true, onResidency: () => {} },
    ]) {
      const err = await t.transcribe(new Float32Array(16), { probe }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WnwError);
      expect(err).toMatchObject({ code: 'BAD_ARGUMENT' });
      expect((err as Error).message).toMatch(
        /^probe\.on\w+ cannot run in a worker .*use the in-thread transcriber \(loadTranscriber\)/,
      );
    }
    expect(sent.filter((s) => s.type === 'transcribe')).toEqual([]);
  });
});
