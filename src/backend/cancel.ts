/**
 * Cancel and device loss while a backend is made: the signal checked where the work has a
 * step of its own (each uploaded matrix), raced where it has none (pipeline compilation),
 * and whatever was made freed when either ends the creation.
 */
import { CancelledError, DeviceLostError } from '../errors.js';
import type { GpuContext } from '../gpu/device.js';

/** A promise that rejects with a CancelledError when `signal` fires (never without one); `done` unhooks it. */
export function cancelled(
  signal: AbortSignal | undefined,
  phase = 'compile',
): { promise: Promise<never>; done(): void } {
  if (!signal) return { promise: new Promise<never>(() => {}), done: () => {} };
  let onAbort = () => {};
  const promise = new Promise<never>((_, reject) => {
    onAbort = () => reject(new CancelledError('', phase));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  promise.catch(() => {});
  return { promise, done: () => signal.removeEventListener('abort', onAbort) };
}

/** The upload's progress callback with the signal checked first: the upload stops at its next matrix and frees what it made. */
export function cancellableUpload(
  signal: AbortSignal | undefined,
  onUpload?: (loaded: number, total: number) => void,
): (loaded: number, total: number) => void {
  return (loaded, total) => {
    if (signal?.aborted) throw new CancelledError('', 'upload');
    onUpload?.(loaded, total);
  };
}

/** The device's loss if it is lost now or within `ms` (its `lost` promise may settle just after the failure that showed it). */
export async function lostWithin(ctx: GpuContext, ms: number): Promise<GPUDeviceLostInfo | null> {
  return Promise.race([ctx.device.lost, new Promise<null>((r) => setTimeout(() => r(null), ms))]);
}

/**
 * The compiled kernels and the uploaded weights, raced against the signal. On a cancel, a
 * failure or a lost device: the weights freed (by the upload itself, or here once it is
 * done), the device destroyed when the backend made it, and a lost device said as a
 * DeviceLostError (a pipeline or buffer that failed because the device went away).
 */
export async function settleCreation<K, W extends { destroy(): void }>(
  ctx: GpuContext,
  kernels: Promise<K>,
  upload: Promise<W>,
  signal: AbortSignal | undefined,
  ownsDevice: boolean,
): Promise<[K, W]> {
  const stop = cancelled(signal);
  try {
    const made = await Promise.race([Promise.all([kernels, upload]), stop.promise]);
    // A device destroyed while the pipelines compiled still hands them over: ask it once more.
    await lostWithin(ctx, 0);
    ctx.check();
    return made;
  } catch (e) {
    (await upload.catch(() => null))?.destroy();
    const lost = e instanceof CancelledError ? null : await lostWithin(ctx, 100);
    if (ownsDevice) ctx.device.destroy();
    throw lost ? new DeviceLostError(`${lost.reason}: ${lost.message}`) : e;
  } finally {
    stop.done();
  }
}
