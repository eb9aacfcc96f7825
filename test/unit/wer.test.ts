import { describe, expect, it } from 'vitest';
import {
  alignWords,
  normalizeWords,
  pooledCounts,
  pooledWer,
  truncateHypothesis,
  wer,
  werCounts,
} from '../../src/eval/wer.js';

/** Plain full-matrix Levenshtein, as a reference for the two-row implementation. */
function levenshtein(a: string[], b: string[]): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length][b.length];
}

describe('WER', () => {
  it('normalises: lower-case, punctuation removed except apostrophes and periods', () => {
    expect(normalizeWords('Hello, World! It’s   "fine" -- Mr. Smith; well-known (yes)?')).toEqual([
      'hello',
      'world',
      "it's",
      'fine',
      'mr.',
      'smith',
      'wellknown',
      'yes',
    ]);
    expect(normalizeWords('  ')).toEqual([]);
  });

  it('counts substitutions, deletions and insertions', () => {
    expect(alignWords(['a', 'b', 'c'], ['a', 'b', 'c'])).toMatchObject({
      edits: 0,
      substitutions: 0,
      deletions: 0,
      insertions: 0,
    });
    expect(alignWords(['a', 'b', 'c'], ['a', 'x', 'c'])).toMatchObject({ edits: 1, substitutions: 1 });
    expect(alignWords(['a', 'b', 'c'], ['a', 'c'])).toMatchObject({ edits: 1, deletions: 1 });
    expect(alignWords(['a', 'b'], ['a', 'x', 'b'])).toMatchObject({ edits: 1, insertions: 1 });
    expect(alignWords([], ['a', 'b'])).toMatchObject({ edits: 2, insertions: 2 });
    expect(alignWords(['a', 'b'], [])).toMatchObject({ edits: 2, deletions: 2 });
  });

  it('agrees with a full-matrix Levenshtein on random sequences, and S+D+I = edits', () => {
    let s = 12345;
    const rnd = (n: number) => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s % n);
    for (let trial = 0; trial < 200; trial++) {
      const a = Array.from({ length: rnd(12) }, () => 'w' + rnd(4));
      const b = Array.from({ length: rnd(12) }, () => 'w' + rnd(4));
      const c = alignWords(a, b);
      expect(c.edits).toBe(levenshtein(a, b));
      expect(c.substitutions + c.deletions + c.insertions).toBe(c.edits);
      expect(c.referenceWords - c.deletions + c.insertions).toBe(b.length);
    }
  });

  it('truncates the hypothesis to floor(1.2 × reference words)', () => {
    const ref = 'one two three four five six seven eight nine ten';
    expect(truncateHypothesis(ref.split(' '), Array(30).fill('x')).length).toBe(12);
    expect(truncateHypothesis(['a', 'b', 'c', 'd', 'e', 'f', 'g'], Array(30).fill('x')).length).toBe(8);
    // A runaway repetition is capped: 10 correct words + 2 insertions kept, the rest cut.
    const hyp = ref + ' ' + 'again '.repeat(500);
    expect(werCounts(ref, hyp)).toMatchObject({ edits: 2, insertions: 2, hypothesisWords: 12 });
    expect(wer(ref, hyp)).toBeCloseTo(0.2, 12);
  });

  it('can exceed 100 % and handles empty texts', () => {
    expect(wer('a b c d e', 'v w x y z q')).toBeCloseTo(6 / 5, 12);
    expect(wer('', 'anything at all')).toBe(0);
    expect(wer('a b', '')).toBe(1);
    expect(wer('The cat.', 'the cat.')).toBe(0);
    expect(wer('The cat.', 'the cat')).toBe(0.5); // the period is kept, as the metric says
  });

  it('pools over clips as total edits / total reference words', () => {
    const pairs = [
      { reference: 'a b c d', hypothesis: 'a b c d' },
      { reference: 'e f', hypothesis: 'e x' },
      { reference: 'g h i j k l m n o p', hypothesis: 'g h' },
    ];
    expect(pooledWer(pairs)).toBeCloseTo((0 + 1 + 8) / 16, 12);
    expect(pooledCounts(pairs)).toMatchObject({ edits: 9, referenceWords: 16, substitutions: 1, deletions: 8 });
    expect(pooledWer([])).toBe(0);
  });

  it('is fast enough for hour-long transcripts (10k words)', () => {
    const ref = Array.from({ length: 10_000 }, (_, i) => 'w' + (i % 97)).join(' ');
    const hyp = Array.from({ length: 10_000 }, (_, i) => 'w' + (i % 89)).join(' ');
    const t0 = performance.now();
    const c = werCounts(ref, hyp);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(c.edits).toBeGreaterThan(0);
  });
});
