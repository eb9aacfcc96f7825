import { describe, expect, it } from 'vitest';
import { matchWords, pauseCounts, wordTimeErrors } from '../../src/eval/word-times.js';
import { quantile } from '../../src/quantile.js';

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

  it('counts pauses found, missed and spurious between words that follow each other on both sides', () => {
    const ref = [
      { word: 'a', start: 0, end: 0.3 },
      { word: 'b', start: 0.9, end: 1.2 }, // a pause before it
      { word: 'c', start: 1.3, end: 1.6 },
      { word: 'd', start: 2.4, end: 2.6 }, // a pause before it
      { word: 'e', start: 2.7, end: 3 },
      { word: 'f', start: 3.1, end: 3.3 },
      { word: 'g', start: 4, end: 4.2 }, // a pause, but "x" comes between f and g in the hypothesis
    ];
    const hyp = [
      { word: 'a', start: 0, end: 0.3 },
      { word: 'b', start: 0.85, end: 1.2 }, // found
      { word: 'c', start: 1.3, end: 2.3 },
      { word: 'd', start: 2.4, end: 2.6 }, // missed
      { word: 'e', start: 3.2, end: 3.3 }, // spurious
      { word: 'f', start: 3.4, end: 3.5 },
      { word: 'x', start: 3.6, end: 3.7 },
      { word: 'g', start: 4.5, end: 4.6 },
    ];
    expect(pauseCounts(ref, hyp, 0.5)).toEqual({ found: 1, missed: 1, spurious: 1 });
    expect(pauseCounts(ref, hyp, 0.7)).toEqual({ found: 0, missed: 1, spurious: 0 });
  });

  it('takes quantiles between ranks', () => {
    expect(quantile([1, 2, 3, 4, 5], 0.5)).toBe(3);
    expect(quantile([0, 10], 0.9)).toBeCloseTo(9, 9);
    expect(quantile([], 0.5)).toBeNaN();
  });
});
