/** What the tests expect of a finished WnW decode, whatever the model. */
import { expect } from 'vitest';

/** A WnW decode finished: no error, some steps, part of the cache on the GPU side, stopped by eos or the cap. */
export function expectWnwDecoded(r: {
  error?: unknown;
  stats: { policy: string; decodeSteps: number; kv: { rGpu: number }; stoppedBy: string };
}): void {
  expect(r.error).toBeUndefined();
  expect(r.stats.policy).toBe('wnw');
  expect(r.stats.decodeSteps).toBeGreaterThan(0);
  expect(r.stats.kv.rGpu).toBeGreaterThan(0);
  expect(r.stats.kv.rGpu).toBeLessThan(1);
  expect(['eos', 'length-guard']).toContain(r.stats.stoppedBy);
}
