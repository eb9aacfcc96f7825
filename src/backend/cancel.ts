/** Cancellation of work that has no step of its own at which to look at the signal (pipeline compilation). */
import { CancelledError } from '../errors.js';

/** A promise that rejects with a CancelledError when `signal` fires (never without one); `done` unhooks it. */
export function cancelled(signal: AbortSignal | undefined, phase = 'compile'): { promise: Promise<never>; done(): void } {
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
