/** Setup of GPU objects whose failure WebGPU reports only asynchronously, through error scopes. */
import { OutOfMemoryError } from '../errors.js';

/**
 * Runs `make` inside out-of-memory and validation error scopes. WebGPU reports both
 * only asynchronously: `failure` resolves to the typed error, or null.
 */
export function scopedSetup<T>(
  d: GPUDevice,
  make: () => T,
  what: string,
  bytes: number,
): { value: T; failure: Promise<Error | null> } {
  d.pushErrorScope('out-of-memory');
  d.pushErrorScope('validation');
  let value: T | null = null;
  let thrown: unknown = null;
  try {
    value = make();
  } catch (e) {
    thrown = e;
  }
  const failure = d.popErrorScope().then(async (validation) => {
    const oom = await d.popErrorScope();
    if (oom) return new OutOfMemoryError(what, bytes) as Error;
    if (validation) return new Error(`WebGPU setup of ${what} failed: ${validation.message}`);
    return null;
  });
  if (thrown !== null || value === null) throw thrown;
  return { value, failure };
}
