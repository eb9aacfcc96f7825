/**
 * The arithmetic of `npm run bench -- --calibration-cost` (src/bench/calibration-cost.ts):
 * the FLOPs it divides the measured time by, and the run time it extrapolates to. The
 * measurement itself runs the decoder at a real backbone's shapes (minutes): that is the
 * bench's job, not a unit test's.
 */
import { describe, expect, it } from 'vitest';
import {
  ceFlops,
  formatCostReport,
  layerFlops,
  parseCostArgs,
  modelledTriage,
  runTime,
  type CostReport,
} from '../../src/bench/calibration-cost.js';
import { shapeConfig } from '../../src/bench/shapes.js';

describe('calibration cost arithmetic', () => {
  const c = shapeConfig('voxtral-mini-3b', 30);

  it('reads its options with the defaults the docs quote, and refuses what cannot run', () => {
    const o = parseCostArgs(['--calibration-cost']);
    expect(o).toMatchObject({
      shape: 'voxtral-mini-3b',
      layers: 1,
      audioTokens: 375,
      answer: 100,
      ceTokens: 8,
      weights: 'f16',
      backends: ['cpu', 'webgpu'],
    });
    expect(() => parseCostArgs(['--layers', '31'])).toThrow(/1\.\.30/);
    expect(() => parseCostArgs(['--weights', 'q8'])).toThrow(/f32, f16 or q4/);
    expect(() => parseCostArgs(['--shape', 'nope'])).toThrow(/unknown decoder shape/);
  });

  it("one row through one layer is two FLOPs per weight plus its attention to itself; 30 layers hold Voxtral-Mini-3B's 3.2 B decoder weights", () => {
    const D = c.hiddenSize;
    const qd = c.numHeads * c.headDim;
    const kvd = c.numKvHeads * c.headDim;
    const weights = D * (qd + 2 * kvd) + qd * D + 3 * D * c.intermediateSize;
    expect(layerFlops(c, 1)).toBe(2 * weights + 4 * qd);
    expect((30 * weights) / 1e9).toBeCloseTo(3.2, 1);
    // Rows double: the matrices' work doubles, causal attention's about quadruples.
    const n = 475;
    const attention = (m: number) => layerFlops(c, m) - 2 * m * weights;
    expect(attention(2 * n) / attention(n)).toBeCloseTo(4, 1);
    expect(ceFlops(c, 100)).toBe(2 * 100 * 131072 * 3072);
  });

  it('a run is clips × forwardsPerClip × the time of one forward', () => {
    const r = { totalLayers: 30, numKvHeads: 8 };
    expect(runTime(r, 1000, 8, 2)).toBe(8 * 250 * 1000);
    expect(runTime(r, 1000, 50, 4)).toBe(50 * 498 * 1000);
  });

  it('the report states what was measured and what is arithmetic', () => {
    const r: CostReport = {
      shape: 'voxtral-mini-3b',
      totalLayers: 30,
      numKvHeads: 8,
      positions: 479,
      answer: 100,
      flopsPerLayer: 1e11,
      flopsCe: 8e10,
      flopsPerForward: 3.08e12,
      cpu: {
        layers: 1,
        positions: 479,
        layersMs: 60_000,
        ceMsPerRow: 600,
        msPerLayer: 60_000,
        gflops: 1.7,
        msPerForward: 1_860_000,
      },
    };
    const text = formatCostReport(r);
    expect(text).toContain('| CPU reference decoder (f32, TypeScript) | 1 | 60000 | 1.7 | 1860000 | 126 / 250 / 498 |');
    expect(text).toMatch(/Measured: the layer times/);
  });

  it("the default triage at Voxtral-Mini-3B's shape: 8 clips of one forward, each a forward's FLOPs plus the answer rows' backward", () => {
    const m = modelledTriage(parseCostArgs(['--calibration-cost', '--modelled']));
    expect(m).toMatchObject({ shape: 'voxtral-mini-3b', clips: 8, forwards: 8 });
    // 479 rows: [prefix][375 audio][instruction][99 answer inputs]; a forward's layers and the LM head on the answer.
    const n = 479;
    const forward = 30 * layerFlops(c, n);
    // Per layer for the 100 answer rows: gate and up again and back through down, gate and up
    // (5 products of 3,072 × 8,192); W_O again, W_Oᵀ and W_Qᵀ (3 of 3,072 × 4,096); the scores
    // over the 479 keys again, v·δ and dq; the audio attention and the key gradients' norms.
    const extrasPerClip =
      2 * ceFlops(c, 100) +
      30 *
        (2 * 100 * c.hiddenSize * 8192 * 5 +
          2 * 100 * c.hiddenSize * 4096 * 3 +
          2 * 100 * 32 * n * 128 * 3 +
          2 * 100 * 32 * 375 * 128 +
          100 * 375 * 32 * 4 * 128 +
          100 * 375 * 8 * 2 * 128);
    expect(m.tflopPerForward * 1e12).toBeCloseTo(forward + extrasPerClip, -6);
    expect(m.minutesAt['2']).toBeCloseTo((8 * (forward + extrasPerClip)) / 2e12 / 60, 9);
    expect(m.minutesAt['10']).toBeCloseTo(m.minutesAt['2'] / 5, 9);
    // The issue's bound: at most 3 minutes on a 2 TFLOP/s adapter (the finite differences' default: 54).
    expect(m.minutesAt['2']).toBeLessThanOrEqual(3);
  });
});
