/**
 * The transcription worker (src/worker/worker.ts) with the soak's probe beside it: every
 * GPU buffer made in this worker is counted (a createBuffer/destroy hook on
 * GPUDevice.prototype, installed before any device exists), and a 'soak-memory' message
 * answers with the live buffers, their bytes and the worker's JS heap after a garbage
 * collection (Chromium started with --js-flags=--expose-gc and --enable-precise-memory-info).
 * The worker's own messages carry positive ids; the probe's replies carry the negative id it
 * was asked with, which the client's handlers never hold.
 */
import { countLiveBuffersEverywhere } from '../../src/bench/live-bytes.js';
import '../../src/worker/worker.js';

const live = countLiveBuffersEverywhere();

/** `unlabelledBytes`: buffers made without a label, which are the ONNX runtime's (every buffer wnw makes is labelled). */
export interface SoakMemory {
  type: 'soak-memory';
  id: number;
  buffers: number;
  bytes: number;
  unlabelledBytes: number;
  heapBytes: number | null;
}

const scope = self as unknown as {
  addEventListener(t: 'message', f: (e: MessageEvent) => void): void;
  postMessage(m: SoakMemory): void;
};
scope.addEventListener('message', (e: MessageEvent<{ type?: string; id: number }>) => {
  if (e.data?.type !== 'soak-memory') return;
  (globalThis as { gc?: () => void }).gc?.();
  const memory = (performance as Performance & { memory?: { usedJSHeapSize: number } }).memory;
  const unlabelledBytes = live.byLabel()['']?.bytes ?? 0;
  scope.postMessage({
    type: 'soak-memory',
    id: e.data.id,
    buffers: live.buffers,
    bytes: live.live,
    unlabelledBytes,
    heapBytes: memory ? memory.usedJSHeapSize : null,
  });
});
