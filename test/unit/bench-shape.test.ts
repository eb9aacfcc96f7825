import { describe, expect, it } from 'vitest';
import {
  formatShapeReport,
  parseShapeBenchArgs,
  randomPackedWeights,
  runShapeBench,
  shapeConfig,
} from '../../src/bench/shape.js';
import { decoderShapeConfig } from '../../src/model/testing.js';
import { decoderWeightBytes, packedWeightBytes } from '../../src/model/packed-weights.js';

describe('decoder shape bench', () => {
  it('parses its arguments and knows the Voxtral-Mini-3B text decoder', () => {
    const o = parseShapeBenchArgs(['--shape', 'voxtral-mini-3b']);
    expect(o).toMatchObject({
      layers: 1,
      weights: 'q4',
      minutes: [1, 10, 30],
      steps: 16,
      backend: 'auto',
      bandwidth: undefined,
      kv: 'f32',
    });
    expect(parseShapeBenchArgs(['--shape', 'voxtral-mini-3b', '--kv', 'f16']).kv).toBe('f16');
    const c = shapeConfig('voxtral-mini-3b', 2);
    expect(c).toMatchObject({
      numLayers: 2,
      hiddenSize: 3072,
      intermediateSize: 8192,
      numHeads: 32,
      numKvHeads: 8,
      headDim: 128,
      vocabSize: 131072,
    });
    expect(c.audio.tokensPerSecond).toBe(12.5);
    expect(c.maxPositions).toBeGreaterThan(30 * 60 * 12.5);
    expect(() => parseShapeBenchArgs(['--shape', 'llama'])).toThrow(/unknown decoder shape/);
    expect(() => parseShapeBenchArgs(['--shape', 'voxtral-mini-3b', '--layers', '31'])).toThrow(/1\.\.30/);
    expect(() => parseShapeBenchArgs(['--shape', 'voxtral-mini-3b', '--weights', 'q8'])).toThrow(/--weights/);
    expect(() => parseShapeBenchArgs(['--shape', 'voxtral-mini-3b', '--bandwidth', 'fast'])).toThrow(/GB\/s/);
  });

  it('packs random weights tensor by tensor to the bytes the config implies', () => {
    const c = { ...decoderShapeConfig('voxtral'), vocabSize: 20000 }; // > 8,192 rows: the embedding comes in row blocks
    for (const f of ['q4', 'f16'] as const)
      expect(packedWeightBytes(randomPackedWeights(c, f)).total).toBe(decoderWeightBytes(c, f).total);
  });

  it('reports full and WnW rows per length on a tiny config (CPU)', async () => {
    const c = { ...decoderShapeConfig('voxtral'), numLayers: 2, numKvHeads: 4, numHeads: 8 };
    const o = parseShapeBenchArgs([
      '--shape',
      'voxtral-mini-3b',
      '--minutes',
      '0.2,0.4',
      '--steps',
      '4',
      '--backend',
      'cpu',
      '--bandwidth',
      '100',
    ]);
    const r = await runShapeBench(o, () => {}, c);
    expect(r.cpuFigures).toBe(true);
    expect(r.rows.map((x) => [x.minutes, x.audioTokens, x.policy])).toEqual([
      [0.2, 150, 'full'],
      [0.2, 150, 'wnw'],
      [0.4, 300, 'full'],
      [0.4, 300, 'wnw'],
    ]);
    for (const x of r.rows) {
      expect(x.msPerToken).toBeGreaterThan(0);
      expect(x.weightMBPerStep).toBeGreaterThan(0);
      expect(x.floorMs).toBeCloseTo((((x.weightMBPerStep + x.kvMBPerStep) * 1e6) / 100e9) * 1000, 9);
    }
    expect(r.rows[0].msPerTokenVsFull).toBe(1);
    // The CPU backend serves WnW the prefill it kept from the full cache's run: no speed to report.
    expect(r.rows.map((x) => Number.isFinite(x.prefillTokensPerSecond))).toEqual([true, false, true, false]);
    // WnW at 0.2 keeps less KV than the full cache at the same length
    expect(r.rows[1].kvMBPerStep).toBeLessThan(r.rows[0].kvMBPerStep);
    expect(formatShapeReport(r)).toContain('CPU figures');
  });
});
