import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/model/config.js';
import { referenceConfig } from '../../src/model/testing.js';
import { ModelLoadError } from '../../src/errors.js';

const SHIPPED = 'public/models/wnw-ref/config.json';

describe('model config', () => {
  it('the random reference model has the shipped model shapes', (ctx) => {
    if (!existsSync(SHIPPED)) ctx.skip(`${SHIPPED} is absent`);
    const shipped = parseConfig(JSON.parse(readFileSync(SHIPPED, 'utf8')));
    const ref = referenceConfig();
    for (const k of [
      'vocabSize',
      'hiddenSize',
      'intermediateSize',
      'numLayers',
      'numHeads',
      'numKvHeads',
      'headDim',
    ] as const) {
      expect(ref[k], k).toBe(shipped[k]);
    }
    expect(ref.audio.encoderWindowFrames).toBe(shipped.audio.encoderWindowFrames);
    expect(shipped.numLayers * shipped.numKvHeads).toBeGreaterThanOrEqual(32);
  });

  it('rejects configs that contradict themselves, naming the field', () => {
    const good = JSON.parse(
      JSON.stringify({
        vocab_size: 64,
        hidden_size: 32,
        intermediate_size: 64,
        num_layers: 1,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 8,
        rope_theta: 1e4,
        rms_norm_eps: 1e-5,
        max_positions: 1024,
        tokens: { bos: 1, eos: 2, pad: 0 },
        instruction: [3],
        audio: {
          sample_rate: 16000,
          n_fft: 512,
          win_length: 400,
          hop_length: 160,
          n_mels: 80,
          f_min: 0,
          f_max: 8000,
          mel_floor: 1e-6,
          mel_mean: 0,
          mel_std: 1,
          frames_per_token: 8,
          tokens_per_second: 12.5,
          encoder_window_frames: 800,
        },
      }),
    );
    expect(parseConfig(good).numKvHeads).toBe(2);
    expect(() => parseConfig({ ...good, num_kv_heads: 3 })).toThrow(/multiple of num_kv_heads/);
    expect(() => parseConfig({ ...good, audio: { ...good.audio, tokens_per_second: 25 } })).toThrow(
      /tokens_per_second/,
    );
    expect(() => parseConfig({ ...good, instruction: [999] })).toThrow(ModelLoadError);
    expect(() => parseConfig({ ...good, hidden_size: 'big' })).toThrow(/hidden_size/);
  });
});
