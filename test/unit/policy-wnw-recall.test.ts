/**
 * How much WnW recalls per step (policy/wnw/recall.ts): under strictBudget one-segment
 * chunks and a top-k that grows with the clip, never below the paper's 3; paper mode keeps
 * the paper's three 4 s chunks.
 */
import { describe, expect, it } from 'vitest';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { chunkOptionsFor, recallOptions, SCALED_RECALL } from '../../src/policy/wnw/recall.js';
import { PAPER_CHUNKS } from '../../src/policy/wnw/chunks.js';
import { WnwError } from '../../src/errors.js';
import { makeLayout, prefillObservation, syntheticHeads } from './policy-fixtures.js';

const n = 25; // 2 s at 12.5 tokens/s

describe('recall scaled with the clip', () => {
  it('recalls one one-segment chunk per 9 of the clip, at least 3', () => {
    const at = (segments: number) => chunkOptionsFor(SCALED_RECALL, segments * n, n);
    expect(at(28)).toEqual({ chunkSegments: 1, topChunks: 3, delta: 3, lead: 0 });
    expect(at(83).topChunks).toBe(9);
    expect(at(120).topChunks).toBe(13);
    expect(at(5).topChunks).toBe(3);
    // A part segment at the end counts as a segment.
    expect(chunkOptionsFor(SCALED_RECALL, 83 * n + 1, n).topChunks).toBe(9);
  });

  it('keeps the paper chunks in paper mode and takes a fixed top-k when given one', () => {
    expect(chunkOptionsFor(recallOptions({ budget: 0.2 }, false), 120 * n, n)).toEqual({ ...PAPER_CHUNKS, lead: 0 });
    expect(chunkOptionsFor(recallOptions({ budget: 0.2, topChunks: 5, chunkSegments: 2 }, true), 120 * n, n)).toEqual({
      chunkSegments: 2,
      topChunks: 5,
      delta: 3,
      lead: 0,
    });
    expect(chunkOptionsFor(recallOptions({ budget: 0.2, recallEvery: 4 }, true), 120 * n, n).topChunks).toBe(30);
    expect(chunkOptionsFor(recallOptions({ budget: 0.2, topChunks: 'scaled' }, false), 120 * n, n).topChunks).toBe(
      Math.round(119 / 9),
    );
  });

  it('refuses recallEvery beside a fixed top-k, and a top-k that is not a number or "scaled"', () => {
    expect(() => recallOptions({ budget: 0.2, topChunks: 4, recallEvery: 9 }, true)).toThrow(WnwError);
    expect(() => recallOptions({ budget: 0.2, topChunks: 'many' }, true)).toThrow(/topChunks/);
  });

  it('gives the policy a scheduler that recalls more chunks on a long clip than on a short one', () => {
    const schedulerFor = (segments: number) => {
      const layout = makeLayout(2, 4, segments * n);
      const p = new WnwPolicy({ budget: 0.2, heads: syntheticHeads(layout, 3) });
      p.prefill(prefillObservation(layout, 1));
      return p.chunkScheduler!;
    };
    const short = schedulerFor(28);
    const long = schedulerFor(120);
    expect(short.opts).toEqual({ chunkSegments: 1, topChunks: 3, delta: 3, lead: 0 });
    expect(long.opts.topChunks).toBe(13);
    expect(long.chunks).toBe(120);
  });
});
