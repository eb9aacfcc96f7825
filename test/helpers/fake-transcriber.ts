/** What a fake `Transcriber` in a test needs besides the calls the test makes. */
import type { ModelInfo } from '../../src/types.js';

export const FAKE_MODEL_INFO: ModelInfo = {
  name: 'fake',
  family: null,
  maxAudioSeconds: 600,
  can: { ask: false, translate: false },
  heads: false,
  audioRoute: 'fake',
};

export const fakeTranscriberRest = {
  backendReason: null,
  modelInfo: FAKE_MODEL_INFO,
  live: (): never => {
    throw new Error('this fake does not record live');
  },
  calibrate: (): never => {
    throw new Error('this fake does not calibrate');
  },
  async [Symbol.asyncDispose]() {},
};
