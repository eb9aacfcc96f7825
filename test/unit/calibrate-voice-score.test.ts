/** Voice Score on synthetic attention where we know which query heads look inside the word's span. */
import { describe, expect, it } from 'vitest';
import { spanTokens, VoiceScoreAccumulator } from '../../src/calibrate/voice-score.js';
import { rng } from './policy-fixtures.js';

const shape = { numLayers: 2, numHeads: 4, numKvHeads: 2, tokensPerSecond: 12.5 };
const T = 250;

/**
 * Query heads: layer 0 heads 0,1 (KV head 0) look at the word; layer 0 heads 2,3 (KV head 1)
 * look at a fixed early position; layer 1 head 0 looks at the word, head 1 does not (KV head 2
 * half); layer 1 heads 2,3 (KV head 3) put their top-4 half inside, half outside.
 */
function attentionFor(first: number, last: number, r: () => number) {
  return (q: number): Float32Array => {
    const a = Float32Array.from({ length: T }, () => 0.001 * r());
    const inside = (k: number) => {
      for (let i = 0; i < k; i++) a[Math.min(last, first + i)] += 1 - 0.01 * i;
    };
    const outside = (k: number) => {
      for (let i = 0; i < k; i++) a[(last + 40 + i) % T] += 1 - 0.01 * i;
    };
    if (q === 0 || q === 1 || q === 4) inside(4);
    else if (q === 2 || q === 3 || q === 5) outside(4);
    else {
      inside(2);
      outside(2);
    }
    return a;
  };
}

describe('Voice Score', () => {
  it('K is one spoken word: 4 at 12.5 tokens/s, 8 at 25', () => {
    expect(new VoiceScoreAccumulator(shape).k).toBe(4);
    expect(new VoiceScoreAccumulator({ ...shape, tokensPerSecond: 25 }).k).toBe(8);
  });

  it('maps a word span in seconds to the audio tokens it overlaps', () => {
    expect(spanTokens({ start: 1.0, end: 1.4 }, 12.5, T)).toEqual([12, 17]);
    expect(spanTokens({ start: 1.0, end: 1.04 }, 12.5, T)).toEqual([12, 12]); // exact boundary: no extra token
    expect(spanTokens({ start: 19.9, end: 25 }, 12.5, T)).toEqual([248, 249]);
  });

  it('scores heads that look inside the span 1, elsewhere 0, and averages the g query heads per KV head', () => {
    const acc = new VoiceScoreAccumulator(shape);
    const r = rng(1);
    for (let clip = 0; clip < 3; clip++) {
      for (let t = 0; t < 10; t++) {
        const start = 0.5 + t * 1.5;
        const span = { start, end: start + 0.5, confidence: 0.95 };
        const [first, last] = spanTokens(span, 12.5, T);
        expect(acc.addToken(span, T, attentionFor(first, last, r))).toBe(true);
      }
      acc.endClip();
    }
    const res = acc.result();
    expect(res.clips).toBe(3);
    expect(res.tokens).toBe(30);
    expect(res.perQueryHead.slice(0, 4)).toEqual([1, 1, 0, 0]);
    expect(res.voiceScore).toEqual([1, 0, 0.5, 0.5]);
  });

  it('skips tokens below 0.85 alignment confidence', () => {
    const acc = new VoiceScoreAccumulator(shape);
    const r = rng(2);
    const good = { start: 2, end: 2.4, confidence: 0.9 };
    const [f, l] = spanTokens(good, 12.5, T);
    acc.addToken(good, T, attentionFor(f, l, r));
    // A low-confidence token whose "span" misses every head's focus would pull VS down.
    expect(acc.addToken({ start: 10, end: 10.4, confidence: 0.5 }, T, attentionFor(f, l, r))).toBe(false);
    const res = acc.result();
    expect(res.skipped).toBe(1);
    expect(res.voiceScore[0]).toBe(1);
  });

  it('averages per clip first, then over clips', () => {
    const acc = new VoiceScoreAccumulator({ numLayers: 1, numHeads: 1, numKvHeads: 1, tokensPerSecond: 12.5 });
    const hitAt = (p: number) => () =>
      Float32Array.from({ length: T }, (_, i) => (Math.abs(i - p) <= 2 ? 1 - Math.abs(i - p) * 0.1 : 0));
    acc.addToken({ start: 4, end: 4.4 }, T, hitAt(52)); // clip 1: one token, all of its top 4 in tokens 50..54
    acc.endClip();
    for (let i = 0; i < 3; i++) acc.addToken({ start: 4, end: 4.4 }, T, hitAt(150)); // clip 2: three misses
    acc.endClip();
    expect(acc.result().voiceScore[0]).toBeCloseTo(0.5, 12);
  });
});
