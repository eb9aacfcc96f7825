import { describe, expect, it } from 'vitest';
import { bleu, tokenize13a } from '../../src/eval/bleu.js';

// Test vectors from sacreBLEU's test suite (test/test_bleu.py, the README example).
const refs = [
  ['The dog bit the man.', 'It was not unexpected.', 'The man bit him first.'],
  ['The dog had bit the man.', 'No one was surprised.', 'The man had bitten the dog.'],
];
const hyps = ['The dog bit the man.', "It wasn't surprising.", 'The man had just bitten him.'];

describe('bleu', () => {
  it("matches sacreBLEU's corpus_bleu test vectors", () => {
    expect(bleu(hyps, refs).score).toBeCloseTo(48.530827, 6);
    expect(bleu(hyps, refs, { tokenize: 'none' }).score).toBeCloseTo(49.1919566, 6);
    expect(bleu(hyps, refs, { smooth: 'none' }).score).toBeCloseTo(48.530827, 6);
    expect(bleu(['', '', ''], refs).score).toBe(0);
  });

  it('scores a hand-computed French pair', () => {
    // "Le chat est là ." against "Le chat est ici ." (5 tokens each, no brevity penalty): n-gram
    // matches 4/5, 2/4 ("Le chat", "chat est"), 1/3, 0/2; 'exp' smoothing makes the last 100/(2*2) %.
    const s = bleu(['Le chat est là.'], [['Le chat est ici.']]);
    expect(s.counts).toEqual([4, 2, 1, 0]);
    expect(s.totals).toEqual([5, 4, 3, 2]);
    const expected = Math.exp((Math.log(80) + Math.log(50) + Math.log(100 / 3) + Math.log(25)) / 4);
    expect(s.score).toBeCloseTo(expected, 9);
  });

  it('tokenises as 13a', () => {
    expect(tokenize13a("It wasn't surprising.")).toBe("It wasn't surprising .");
    expect(tokenize13a('3.5 km, 1,000 (approx) 10-20 &amp; "x"')).toBe('3.5 km , 1,000 ( approx ) 10 - 20 & " x "');
  });
});
