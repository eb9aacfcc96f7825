import { describe, expect, it } from 'vitest';
import {
  formatEncoderReport,
  parseEncoderBenchArgs,
  pickRunner,
  randomEncoderTensors,
  runEncoderBench,
} from '../../src/bench/encoder.js';
import { WhisperEncoder, encoderWeightBytes } from '../../src/encoder/index.js';
import { voxtral } from '../../src/model/families/voxtral.js';

describe('encoder bench', () => {
  it('parses its arguments with short defaults and rejects bad ones', () => {
    const o = parseEncoderBenchArgs(['--encoder', 'whisper-large-v3-shape']);
    expect(o).toMatchObject({
      shape: 'whisper-large-v3-shape',
      family: 'voxtral',
      layers: 1,
      weights: 'f32',
      minutes: [1, 10, 30],
      windows: undefined,
      backend: 'auto',
    });
    expect(o.config).toMatchObject({ dModel: 1280, heads: 20, ffnDim: 5120, layers: 32 });
    expect(
      parseEncoderBenchArgs([
        '--encoder',
        'whisper-large-v3-shape',
        '--layers',
        '2',
        '--weights',
        'q4',
        '--minutes',
        '0.5,2',
        '--windows',
        '3',
        '--family',
        'qwen2_audio',
      ]),
    ).toMatchObject({ layers: 2, weights: 'q4', minutes: [0.5, 2], windows: 3, family: 'qwen2_audio' });
    expect(() => parseEncoderBenchArgs(['--encoder', 'whisper-tiny'])).toThrow(/unknown encoder shape/);
    expect(() => parseEncoderBenchArgs(['--encoder', 'whisper-large-v3-shape', '--layers', '33'])).toThrow(/has 32/);
    expect(() => parseEncoderBenchArgs(['--encoder', 'whisper-large-v3-shape', '--weights', 'q8'])).toThrow(
      /--weights/,
    );
    expect(() => parseEncoderBenchArgs(['--encoder', 'whisper-large-v3-shape', '--minutes', '1,-2'])).toThrow(
      /--minutes/,
    );
  });

  it('random tensors build a working encoder and the weight bytes count every Linear in its format', () => {
    const config = { nMels: 128, dModel: 64, layers: 1, heads: 2, ffnDim: 128, maxSourcePositions: 1500 };
    const enc = new WhisperEncoder(config, voxtral.encoder, randomEncoderTensors(config, voxtral.encoder, 96));
    expect(enc.outputWidth).toBe(96);
    const f32 = encoderWeightBytes(config, voxtral.encoder, 96, 'f32');
    // q, k, v, out (64×64), fc1 (128×64), fc2 (64×128), projector 96×256 and 96×96, all f32
    expect(f32.linears).toBe(4 * (4 * 64 * 64 + 2 * 128 * 64 + 96 * 256 + 96 * 96));
    const q4 = encoderWeightBytes(config, voxtral.encoder, 96, 'q4');
    expect(q4.linears).toBeLessThan(f32.linears / 4);
    expect(q4.other).toBe(f32.other);
  });

  it('scales measured windows to each length and reports one row per length', async () => {
    const o = parseEncoderBenchArgs(['--encoder', 'whisper-large-v3-shape', '--minutes', '1,10', '--layers', '2']);
    const calls: number[] = [];
    const report = await runEncoderBench(o, {
      device: 'test',
      cpuFigures: true,
      defaultWindows: 1,
      run: async (w, layers) => {
        calls.push(w, layers);
        return { seconds: (0.1 + 0.2 * layers) * w, tokens: 375 * w, peakBytes: 2 ** 20 };
      },
    });
    expect(calls).toEqual([1, 2, 1, 0]); // one measured window serves both lengths; one without layers
    expect(report.rows.map((r) => [r.minutes, r.windows, r.scaled, r.tokens])).toEqual([
      [1, 2, true, 750],
      [10, 20, true, 7500],
    ]);
    expect(report.rows[0].secondsPerAudioMinute).toBeCloseTo(1, 9); // 0.5 s per 30 s window
    expect(report.rows[0].fixedSecondsPerAudioMinute).toBeCloseTo(0.2, 9);
    expect(report.rows[0].fullEncoderSecondsPerAudioMinute).toBeCloseTo(0.2 + 32 * 0.4, 9); // 0.4 s per layer and audio minute
    expect(report.rows[1].outputMiB).toBeCloseTo((7500 * 3072 * 4) / 2 ** 20, 9);
    // 30 more layers of 4·1280² + 2·1280·5120 f32 weights and 8·1280 + 5120 norm/bias values (two norms' weight and
    // bias, the q, v, out and fc2 biases, fc1's): what the GPU encoder uploads (encoder-sizing.test.ts counts it)
    expect((report.fullEncoderWeightMiB - report.weightMiB) * 2 ** 20).toBe(
      30 * 4 * (4 * 1280 ** 2 + 2 * 1280 * 5120 + 8 * 1280 + 5120),
    );
    const text = formatEncoderReport(report);
    expect(text).toContain('CPU figures');
    expect(text.split('\n').filter((l) => l.startsWith('| 1'))).toHaveLength(2);
  });

  it('runs a real (CPU) encode of one window at a tiny width', async () => {
    const o = {
      ...parseEncoderBenchArgs([
        '--encoder',
        'whisper-large-v3-shape',
        '--minutes',
        '0.5',
        '--layers',
        '2',
        '--backend',
        'cpu',
      ]),
      config: { nMels: 128, dModel: 16, layers: 4, heads: 2, ffnDim: 32, maxSourcePositions: 1500 },
      decoderWidth: 32,
    };
    const runner = await pickRunner(o, () => {});
    try {
      const m = await runner.run(1, 2);
      expect(m.tokens).toBe(375);
      expect(m.seconds).toBeGreaterThan(0);
      expect((await runner.run(1, 0)).tokens).toBe(375);
    } finally {
      runner.dispose();
    }
  });
});
