/** The soak's flat criteria (scripts/soak/criteria.ts): 1 % of GPU bytes and 5 % of heap against run 2, and no failed run. */
import { describe, expect, it } from 'vitest';
import { flatness, type RunMemory } from '../../scripts/soak/criteria.js';

const runs = (gpu: number[], heap: (number | null)[], errors: (string | null)[] = []): RunMemory[] =>
  gpu.map((g, i) => ({ run: i + 1, gpuBytes: g, heapBytes: heap[i] ?? null, error: errors[i] ?? null }));

describe('soak flat criteria', () => {
  it('holds when run 1 grew (a first run makes caches) and the rest stay within the tolerances', () => {
    const v = flatness(runs([50, 100, 100, 100.9], [500, 1000, 1010, 1049]));
    expect(v.pass).toBe(true);
    expect(v.gpuBytesGrowth).toBeCloseTo(0.009, 6);
    expect(v.heapGrowth).toBeCloseTo(0.049, 6);
  });

  it('fails on GPU bytes past 1 %, on a heap past 5 %, on an unmeasured heap and on a failed run', () => {
    expect(flatness(runs([100, 100, 101.1], [1000, 1000, 1000])).pass).toBe(false);
    expect(flatness(runs([100, 100, 100], [1000, 1000, 1051])).pass).toBe(false);
    expect(flatness(runs([100, 100, 100], [null, null, null])).pass).toBe(false);
    const failed = flatness(runs([100, 100, 100], [1000, 1000, 1000], [null, 'DeviceLostError: gone', null]));
    expect(failed.pass).toBe(false);
    expect(failed.checks.find((c) => !c.pass)?.what).toContain('run 2');
  });

  it('needs a run 2 to compare with', () => {
    expect(() => flatness(runs([100], [1000]))).toThrow(/at least 2 runs/);
  });
});
