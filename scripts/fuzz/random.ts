/** The fuzzer's seeded choices: one generator per case, so a case replays from its seed alone. */
import { rng } from '../../src/model/testing.js';

export class Dice {
  private readonly next: () => number;
  constructor(readonly seed: number) {
    this.next = rng(seed);
  }
  float(): number {
    return this.next();
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.next() * xs.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** Values that break numbers and shapes: zero, negatives, fractions, huge, non-finite, other types. */
export const HOSTILE: readonly unknown[] = [
  0,
  -1,
  1,
  0.5,
  3.7,
  1e9,
  2 ** 31,
  2 ** 53,
  1e308,
  -1e308,
  'NaN',
  'Infinity',
  null,
  true,
  '',
  '12',
  'abc',
  [],
  [1, 2],
  {},
  { a: 1 },
];

/** A copy of `bytes` with `n` random bytes overwritten. */
export function flipBytes(d: Dice, bytes: Uint8Array, n: number, from = 0): Uint8Array {
  const out = bytes.slice();
  if (out.length <= from) return out;
  for (let i = 0; i < n; i++) out[d.int(from, out.length - 1)] = d.int(0, 255);
  return out;
}
