/**
 * The real worker module (src/worker/worker.ts) run in this process behind a
 * structured-clone channel: what `loadTranscriberInWorker` talks to in a browser, without
 * a browser. The module installs itself on `self` once per test file (vitest isolates
 * files), so a file makes one such worker.
 */
import type { FromWorker, ToWorker } from '../../src/worker/protocol.js';

/** The page's end of a channel to worker.ts, imported once into this process as the worker's scope. */
export async function inProcessWorker(): Promise<() => Worker> {
  const toPage: ((e: MessageEvent<FromWorker>) => void)[] = [];
  const toWorker: ((e: MessageEvent<ToWorker>) => void)[] = [];
  (globalThis as unknown as { self: unknown }).self = {
    postMessage: (m: FromWorker) => {
      const data = structuredClone(m);
      queueMicrotask(() => toPage.forEach((l) => l({ data } as MessageEvent<FromWorker>)));
    },
    addEventListener: (_: string, l: (e: MessageEvent<ToWorker>) => void) => void toWorker.push(l),
  };
  await import('../../src/worker/worker.js');
  return () =>
    ({
      addEventListener: (type: string, l: (e: MessageEvent<FromWorker>) => void) =>
        void (type === 'message' && toPage.push(l)),
      terminate() {},
      postMessage(m: ToWorker) {
        const data = structuredClone(m);
        queueMicrotask(() => toWorker.forEach((l) => l({ data } as MessageEvent<ToWorker>)));
      },
    }) as unknown as Worker;
}
