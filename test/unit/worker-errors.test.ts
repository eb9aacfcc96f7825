/**
 * A cancel's and a lost device's typed errors cross the worker boundary with their class,
 * the text decoded so far, the phase and the reason (protocol.ts ⇄ client.ts).
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, DeviceLostError, ModelLoadError } from '../../src/errors.js';
import { serializeError } from '../../src/worker/protocol.js';
import { deserializeError } from '../../src/worker/client.js';

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
