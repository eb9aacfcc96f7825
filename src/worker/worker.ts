/**
 * Runs a Transcriber inside a dedicated Web Worker, so decoding (and above all the CPU
 * backend, which computes on the calling thread) never freezes the page. The page side
 * is `loadTranscriberInWorker` in client.ts; the messages are in protocol.ts.
 * One transcriber per worker; transcriptions run one at a time, in arrival order.
 */
import { loadTranscriber } from '../transcribe/transcriber.js';
import type { ProgressEvent, Transcriber } from '../types.js';
import { serializeError, type FromWorker, type ToWorker } from './protocol.js';

interface Scope {
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<ToWorker>) => void): void;
}
const scope = self as unknown as Scope;

let transcriber: Promise<Transcriber> | null = null;
const running = new Map<number, AbortController>();
let queue: Promise<unknown> = Promise.resolve();

const post = (m: FromWorker, transfer: Transferable[] = []) => scope.postMessage(m, transfer);

async function handle(m: ToWorker): Promise<void> {
  switch (m.type) {
    case 'load': {
      transcriber?.then(
        (t) => t.dispose(),
        () => {},
      );
      // A cancel message with the load's id aborts the load (the page's signal cannot be posted).
      const abort = new AbortController();
      running.set(m.id, abort);
      const loading = loadTranscriber({
        ...m.options,
        signal: abort.signal,
        onProgress: (event: ProgressEvent) => post({ type: 'progress', id: m.id, event }),
      });
      transcriber = loading;
      try {
        post({ type: 'loaded', id: m.id, backend: (await loading).backend });
      } catch (e) {
        transcriber = null;
        post({ type: 'failed', id: m.id, error: serializeError(e) });
      } finally {
        running.delete(m.id);
      }
      return;
    }
    case 'transcribe': {
      const abort = new AbortController();
      running.set(m.id, abort);
      const run = async () => {
        try {
          if (!transcriber) throw new Error('load the model before transcribing');
          const t = await transcriber;
          const r = await t.transcribe(m.audio, {
            ...m.options,
            signal: abort.signal,
            onProgress: (event) => post({ type: 'progress', id: m.id, event }),
            onToken: m.wantTokens ? (text, token) => post({ type: 'token', id: m.id, text, token }) : undefined,
            // Steps carry small typed arrays: structured-clone copies are cheap enough.
            onStep: m.wantSteps ? (stats) => post({ type: 'step', id: m.id, stats }) : undefined,
          });
          const { error, ...result } = r;
          post({ type: 'result', id: m.id, result, ...(error ? { error: serializeError(error) } : {}) });
        } catch (e) {
          post({ type: 'failed', id: m.id, error: serializeError(e) });
        } finally {
          running.delete(m.id);
        }
      };
      // Aborting a queued run must still answer, so the abort is checked by transcribe itself.
      queue = queue.then(run, run);
      return;
    }
    case 'cancel':
      running.get(m.id)?.abort();
      return;
    case 'dispose':
      for (const a of running.values()) a.abort();
      await queue;
      (await transcriber?.catch(() => null))?.dispose();
      transcriber = null;
      post({ type: 'disposed', id: m.id });
      return;
  }
}

scope.addEventListener('message', (e) => void handle(e.data));
