/** eval:margins: the full cache's top-1 margins and where another cache's greedy token differs. */
import { describe, expect, it } from 'vitest';
import { formatReport, main, marginReport, topMargin } from '../../src/eval/margins.js';

const logits = (...x: number[]) => Float32Array.from(x);

describe('eval:margins', () => {
  it('the margin is the gap between the two best log-probabilities (a shift of all logits changes nothing)', () => {
    expect(topMargin(logits(2, 0, 1))).toBeCloseTo(1, 6);
    expect(topMargin(logits(12, 10, 11))).toBeCloseTo(1, 6);
    expect(topMargin(logits(1, 1, 0))).toBe(0);
  });

  it("counts steps under each cut and names each flip with the full cache's margin there", () => {
    const full = [logits(0, 0.05), logits(0, 0.3), logits(0, 0.8), logits(0, 3)];
    const other = [logits(1, 0), logits(0, 1), logits(0, 1), logits(1, 0)];
    const r = marginReport(full, other);
    expect(r.steps).toBe(4);
    expect(r.under).toEqual([0.25, 0.5, 0.75]);
    expect(r.flips.map((f) => f.step)).toEqual([0, 3]);
    expect(r.flips[0].margin).toBeCloseTo(0.05, 6);
    expect(formatReport('c', r)).toMatch(
      /^c: 4 steps; margin under 0.1 \/ 0.5 \/ 1 nats: 25.0 % \/ 50.0 % \/ 75.0 %; 2 flips \(agreement 0.500\)/,
    );
    expect(() => marginReport(full, other.slice(1))).toThrow(/4 steps/);
  });

  it('bad arguments are usage errors (exit 2) before any model loads', async () => {
    expect(await main(['--data', 'x', '--against', 'wnw', '--limit', 'abc'])).toBe(2);
    expect(await main(['--data', 'x', '--against', 'full'])).toBe(2);
    expect(await main(['--against', 'wnw'])).toBe(2);
  });
});
