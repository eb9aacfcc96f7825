import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, lowerBudget } from '../../src/ui/messages.js';
import { listSamples } from '../../src/ui/samples-plugin.js';
import { tickFields } from '../../src/ui/readouts.js';
import { serializeError } from '../../src/worker/protocol.js';
import { deserializeError } from '../../src/worker/client.js';
import { AudioError, CancelledError, ContextTooLongError, NoWebGpuError, WnwError } from '../../src/errors.js';
import { tempDir } from '../helpers/temp.js';

const ctx = { policy: 'wnw', budget: 0.4, backend: 'auto' };

describe('demo error messages', () => {
  it('offers the CPU backend when WebGPU is missing and says which browsers work', () => {
    const m = describeError(new NoWebGpuError('navigator.gpu is undefined'), ctx);
    expect(m).toMatchObject({ level: 'error', code: 'NO_WEBGPU', action: { kind: 'use-cpu' } });
    expect(m.hint).toMatch(/Chrome and Edge 113/);
    expect(m.hint).toMatch(/--enable-unsafe-webgpu/);
  });

  it('says how much memory is needed and offers a lower budget', () => {
    const m = describeError(new ContextTooLongError(900 * 2 ** 20, 256 * 2 ** 20, '60 min of audio'), ctx);
    expect(m.body).toMatch(/needs 900\.0 MiB/);
    expect(m.action).toEqual({ kind: 'lower-budget', label: 'Retry with WnW at budget 0.2', budget: 0.2 });
    expect(describeError(new ContextTooLongError(1, 0, 'x'), { ...ctx, policy: 'full' }).action?.budget).toBe(0.2);
    expect(describeError(new ContextTooLongError(1, 0, 'x'), { ...ctx, budget: 0.1 }).action).toBeUndefined();
    expect(lowerBudget('wnw', 0.2)).toBe(0.1);
  });

  it('does not offer a lower budget when the prompt itself is too long for the device', () => {
    const prompt = deserializeError(serializeError(new ContextTooLongError(1, 2 ** 27, 'x', 'prompt-binding')));
    for (const e of [prompt, { code: 'CONTEXT_TOO_LONG', message: prompt.message, limit: 'prompt-binding' }]) {
      const m = describeError(e, ctx);
      expect(m.title).toBe('This recording is too long for this device');
      expect(m.action).toBeUndefined();
      expect(m.body).toMatch(/shorter clip/);
    }
    expect(prompt.message).toMatch(/128\.0 MiB is the most this device binds/);
    const pool = new ContextTooLongError(1, 2 ** 27, 'layer 0 keeps 9000 KV pages', 'pool-binding');
    expect(describeError(pool, ctx).action?.kind).toBe('lower-budget');
    expect(pool.message).toMatch(/kvPrecision "f16"/);
  });

  it('treats cancel as information, bad audio and unknown errors as errors', () => {
    expect(describeError(new CancelledError(), ctx).level).toBe('info');
    expect(describeError(new AudioError('The audio file is empty.'), ctx)).toMatchObject({
      code: 'BAD_AUDIO',
      body: 'The audio file is empty.',
    });
    expect(describeError(new Error('boom'), ctx)).toMatchObject({
      level: 'error',
      title: 'Something went wrong',
      body: 'boom',
    });
    // Errors from a worker arrive as plain objects.
    expect(describeError({ code: 'BAD_AUDIO', message: 'x' }, ctx).title).toBe('This audio cannot be transcribed');
    // Weights no binding holds: converting to q4 is the fix, named with the command.
    expect(describeError({ code: 'MODEL_TOO_BIG', message: 'layers.*.gate_up needs 192.0 MiB' }, ctx)).toMatchObject({
      code: 'MODEL_TOO_BIG',
      hint: expect.stringMatching(/--quant q4/),
    });
  });
});

describe('worker error round trip', () => {
  it('keeps code, message and the typed fields; CancelledError keeps its class', () => {
    const e = deserializeError(serializeError(new ContextTooLongError(10, 5, 'clip')));
    expect(e).toBeInstanceOf(WnwError);
    expect(e).toMatchObject({
      code: 'CONTEXT_TOO_LONG',
      name: 'ContextTooLongError',
      neededBytes: 10,
      availableBytes: 5,
    });
    expect(deserializeError(serializeError(new CancelledError()))).toBeInstanceOf(CancelledError);
    const plain = deserializeError(serializeError(new TypeError('x is not a function')));
    expect(plain).not.toBeInstanceOf(WnwError);
    expect(plain.message).toBe('x is not a function');
  });
});

describe('sample manifest', () => {
  it('lists samples and test sets with WAV durations and references; absent folders are fine', () => {
    const pub = tempDir('wnw-pub-');
    expect(listSamples(pub)).toEqual([]);
    mkdirSync(join(pub, 'samples'));
    mkdirSync(join(pub, 'test-sets', 'flite'), { recursive: true });
    // 16 kHz mono PCM16: byte rate 32000, 64000 data bytes = 2 s.
    const wav = Buffer.alloc(44 + 64000);
    wav.write('RIFF', 0, 'ascii');
    wav.writeUInt32LE(36 + 64000, 4);
    wav.write('WAVEfmt ', 8, 'ascii');
    wav.writeUInt32LE(16, 16);
    wav.writeUInt16LE(1, 20);
    wav.writeUInt16LE(1, 22);
    wav.writeUInt32LE(16000, 24);
    wav.writeUInt32LE(32000, 28);
    wav.writeUInt16LE(2, 32);
    wav.writeUInt16LE(16, 34);
    wav.write('data', 36, 'ascii');
    wav.writeUInt32LE(64000, 40);
    writeFileSync(join(pub, 'samples', 'hello.wav'), wav);
    writeFileSync(join(pub, 'samples', 'hello.txt'), 'hello');
    writeFileSync(join(pub, 'test-sets', 'flite', 'a.wav'), wav);
    writeFileSync(join(pub, 'test-sets', 'flite', 'notes.md'), 'ignored');
    expect(listSamples(pub)).toEqual([
      { url: 'samples/hello.wav', group: 'samples', name: 'hello', seconds: 2, reference: 'samples/hello.txt' },
      { url: 'test-sets/flite/a.wav', group: 'flite', name: 'a', seconds: 2, reference: null },
    ]);
  });
});

describe("live captions' tick readout", () => {
  it('shows the numbers a tick adds to its text, nested ones by their path, and nothing for the text alone', () => {
    expect(tickFields({ committed: 'the cat', tentative: 'sat' })).toBe('');
    const t = { committed: 'a', tentative: 'b', tickMs: 812.345, stats: { reused: 120, words: ['x'] }, note: 'n' };
    expect(tickFields(t)).toBe('tickMs 812.35 · stats.reused 120');
  });
});
