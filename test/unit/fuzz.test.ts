/**
 * The fuzzer's fixed slice: 100 seeded cases (npm run fuzz -- --seed 1 --cases 100) in
 * this process. Each must end in a transcript or a typed WnwError naming the broken file,
 * within the fuzzer's 60 s per case and under 2 GB; no WnwError message may carry the
 * CLI's `wnw:` prefix. The full 1,000-case run (`npm run fuzz`) watches each case from a
 * parent process; this slice is what CI can afford.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeShared, runCase, type Bases, type Verdict } from '../../scripts/fuzz/cases.js';
import { makeBases } from '../../scripts/fuzz/bases.js';
import { pythonHasOnnx } from '../helpers/tiny-model.js';

const SEED = 1;
const CASES = 100;
const HANG_MS = 60_000;

describe.skipIf(!pythonHasOnnx())('fuzz: a fixed 100-case slice', () => {
  let bases: Bases;
  const verdicts: Verdict[] = [];
  beforeAll(async () => {
    bases = await makeBases('vitest');
  }, 300_000);
  afterAll(() => disposeShared());

  it('every case ends in a transcript or one typed error, none hangs or passes 2 GB', async () => {
    const failures: string[] = [];
    for (let i = 0; i < CASES; i++) {
      const seed = SEED + i;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const hang = new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`hang: no verdict after ${HANG_MS / 1000} s`)), HANG_MS)),
      );
      try {
        const v = await Promise.race([runCase(seed, bases), hang]);
        verdicts.push(v);
        if (v.failure) failures.push(`seed ${seed} (${v.kind}: ${v.what}): ${v.failure}`);
      } catch (e) {
        failures.push(`seed ${seed}: ${(e as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
      const rss = process.memoryUsage().rss;
      if (rss > 2 * 2 ** 30) failures.push(`seed ${seed}: process at ${(rss / 2 ** 30).toFixed(2)} GB`);
    }
    expect(failures, `replay one with npm run fuzz -- --seed <seed> --cases 1\n${failures.join('\n')}`).toEqual([]);
    expect(verdicts.length).toBe(CASES);
    // The slice reaches every kind of input, and both ends of the verdict.
    const kinds = new Set(verdicts.map((v) => v.kind));
    for (const k of ['audio', 'file', 'hf-file', 'load-options', 'transcribe-options', 'cli'])
      expect(kinds).toContain(k);
    expect(verdicts.some((v) => v.outcome === 'transcript')).toBe(true);
    expect(verdicts.some((v) => v.outcome === 'MODEL_LOAD')).toBe(true);
  }, 240_000);

  it('no WnwError message the slice produced carries a doubled or any wnw: prefix', () => {
    const messages = verdicts.flatMap((v) => v.messages);
    expect(messages.length).toBeGreaterThan(30);
    expect(messages.filter((m) => /^wnw:|wnw:\s*wnw:/.test(m))).toEqual([]);
  });
});
