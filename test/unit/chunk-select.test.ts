/**
 * The chunk choice the GPU makes (src/reference/chunk-select.ts, the plain-TS mirror of
 * shaders/chunk_select.wgsl) against the scheduler's own ranking (ChunkScheduler, f64):
 * the same chunks in the same order, ties to the lower index, at the geometries WnW runs
 * (the paper's 4 s chunks, and 2 s chunks with the scaled top-k at 30 minutes of Voxtral).
 */
import { describe, expect, it } from 'vitest';
import { ChunkScheduler } from '../../src/policy/wnw/chunks.js';
import { chunkOptionsFor, SCALED_RECALL } from '../../src/policy/wnw/recall.js';
import { chunkCounts, chunkScales, selectChunks, type ChunkSelectSpec } from '../../src/reference/chunk-select.js';
import { rng } from '../../src/model/testing.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { makeLayout, prefillObservation, syntheticHeads } from './policy-fixtures.js';

/** Softmax-like rows: positive, peaked at a few places, summing to about one. */
function attention(rows: number, T: number, seed: number): Float32Array[] {
  const r = rng(seed);
  return Array.from({ length: rows }, () => {
    const peak = Math.floor(r() * T);
    const w = Float32Array.from({ length: T }, (_, p) => Math.exp(-Math.abs(p - peak) / 40) * r() + 1e-5 * r());
    const s = w.reduce((a, b) => a + b, 0);
    return w.map((x) => x / s);
  });
}

/** What WnW's scheduler chooses today from the same rows (A summed in f64 over the first `heads`). */
function schedulerChoice(w: Float32Array[], s: ChunkSelectSpec): number[] {
  const A = new Float64Array(s.audioLength);
  for (const row of w.slice(0, s.heads)) for (let p = 0; p < s.audioLength; p++) A[p] += row[p];
  const sched = new ChunkScheduler(
    s.audioLength,
    s.segmentLength,
    { chunkSegments: s.chunkSegments, topChunks: s.topChunks, delta: 3 },
    new Float64Array(Math.ceil(s.audioLength / s.segmentLength)),
  );
  return sched.step(A, 0).chunks;
}

describe('chunk selection as the GPU makes it', () => {
  const voxtral30 = 30 * 60 * 12.5;
  const scaled = chunkOptionsFor(SCALED_RECALL, voxtral30, 25);
  const cases: [string, ChunkSelectSpec][] = [
    [
      '30 min of Voxtral, 2 s chunks, scaled top-k',
      {
        heads: 5,
        audioLength: voxtral30,
        segmentLength: 25,
        chunkSegments: scaled.chunkSegments,
        topChunks: scaled.topChunks,
      },
    ],
    [
      "10 min and a partial segment, the paper's 4 s chunks",
      { heads: 4, audioLength: 7513, segmentLength: 25, chunkSegments: 2, topChunks: 3 },
    ],
    ['fewer segments than a chunk', { heads: 2, audioLength: 30, segmentLength: 25, chunkSegments: 3, topChunks: 3 }],
    [
      'more chunks asked than the clip has',
      { heads: 3, audioLength: 130, segmentLength: 25, chunkSegments: 2, topChunks: 9 },
    ],
  ];
  for (const [name, spec] of cases) {
    it(`${name}: the scheduler's chunks, in its order`, () => {
      // Two rows more than the anchors: the export's other heads (word timing) are not summed.
      const w = attention(spec.heads + 2, spec.audioLength, spec.audioLength);
      const got = selectChunks(w, spec);
      const want = schedulerChoice(w, spec);
      expect(Array.from(got.chunks)).toEqual(want);
      expect(got.chunks.length).toBe(Math.min(spec.topChunks, chunkCounts(spec).chunks));
      // The flat layout the GPU reads gives the same.
      const flat = new Float32Array(w.length * spec.audioLength);
      w.forEach((row, r) => flat.set(row, r * spec.audioLength));
      expect(Array.from(selectChunks(flat, spec).chunks)).toEqual(want);
      // Segment sums: the anchors' mass per segment (to f32 rounding), none of it lost.
      const total = got.segmentSums.reduce((a, b) => a + b, 0);
      expect(total).toBeCloseTo(spec.heads, 4);
    });
  }

  it('exact ties go to the lower chunk, as the scheduler breaks them', () => {
    const spec: ChunkSelectSpec = { heads: 2, audioLength: 250, segmentLength: 25, chunkSegments: 2, topChunks: 4 };
    const w = [new Float32Array(250).fill(1 / 250), new Float32Array(250).fill(1 / 250)];
    w[1][120] = 0.5; // segment 4: chunks 3 and 4 lead, the rest tie
    const got = Array.from(selectChunks(w, spec).chunks);
    expect(got).toEqual(schedulerChoice(w, spec));
    expect(got).toEqual([3, 4, 0, 1]);
  });

  it("the mean is the sum times the chunk's f32 1/length (a partial last chunk is shorter)", () => {
    const s = chunkScales({ heads: 1, audioLength: 60, segmentLength: 25, chunkSegments: 2, topChunks: 1 });
    expect(Array.from(s)).toEqual([Math.fround(1 / 50), Math.fround(1 / 35)]);
  });
});

describe('WnW fed the chunk choice instead of the weights', () => {
  it('makes the same recall/release plans over 150 random steps (the δ bookkeeping stays on the CPU)', () => {
    const big = makeLayout(4, 4, 1500);
    const heads = syntheticHeads(big, 5);
    const fromWeights = new WnwPolicy({ budget: 0.2, heads });
    const fromChunks = new WnwPolicy({ budget: 0.2, heads });
    const plan = fromWeights.prefill(prefillObservation(big, 8));
    expect(fromChunks.prefill(prefillObservation(big, 8))).toEqual(plan);
    const req = fromChunks.request(big);
    expect(req.decodeWeights).toBe(false);
    const spec = { ...req.decodeChunks!, audioLength: big.audioLength, segmentLength: big.segmentLength };
    const anchors = fromChunks.headRoles.anchors.length;
    let moved = 0;
    for (let s = 0; s < 150; s++) {
      // Anchors hold all their audio: softmax-like rows peaked where this step reads.
      const weights = attention(anchors, big.audioLength, 100 + s);
      const a = fromChunks.afterStep({ step: s, weights: [], chunks: selectChunks(weights, spec).chunks });
      const b = fromWeights.afterStep({ step: s, weights });
      expect(a).toEqual(b);
      moved += a.recall.length + a.release.length;
    }
    expect(moved).toBeGreaterThan(10);
  });
});
