import { describe, expect, it } from 'vitest';
import { matchWords, quantile, wordTimeErrors } from '../../src/eval/word-times.js';

describe('word time errors against a reference alignment', () => {
  it('matches equal words in order, skipping insertions and deletions', () => {
    expect(matchWords(['a', 'b', 'c', 'd'], ['a', 'x', 'c', 'd', 'e'])).toEqual([
      [0, 0],
      [2, 2],
      [3, 3],
    ]);
    expect(matchWords(['a', 'b'], ['c'])).toEqual([]);
  });

  it('gives the start and end errors of the matched words, their words normalised', () => {
    const ref = [
      { word: 'all', start: 0.36, end: 0.63 },
      { word: 'things', start: 0.64, end: 1.03 },
      { word: "it's", start: 1.2, end: 1.5 },
    ];
    const hyp = [
      { word: 'All', start: 0.4, end: 0.6 },
      { word: 'the', start: 0.6, end: 0.7 },
      { word: "it's.", start: 1.0, end: 1.6 },
    ];
    const e = wordTimeErrors(ref, hyp);
    expect(e.start.map((x) => +x.toFixed(3))).toEqual([0.04, 0.2]);
    expect(e.end.map((x) => +x.toFixed(3))).toEqual([0.03, 0.1]);
  });

  it('takes quantiles between ranks', () => {
    expect(quantile([1, 2, 3, 4, 5], 0.5)).toBe(3);
    expect(quantile([0, 10], 0.9)).toBeCloseTo(9, 9);
    expect(quantile([], 0.5)).toBeNaN();
  });
});
