/**
 * A queue worker's transcription thread: the model stays loaded between jobs, and the decoding
 * (synchronous on the CPU backend, minutes for a long recording) runs here, off the worker's
 * event loop, where BullMQ renews the job's lock on time however long it takes.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { parentPort } from 'node:worker_threads';
import { loadTranscriber } from '../transcribe/transcriber.js';
import { serializeError } from '../worker/protocol.js';
import type { Transcriber } from '../index.js';
import type { FromThread, ToThread } from './thread-protocol.js';
import { transcribeRecording } from './transcribe-recording.js';

const port = parentPort;
if (!port) throw new Error('transcription-thread.ts runs in a worker thread (queue-worker.ts starts it)');
const post = (m: FromThread) => port.postMessage(m);

let loaded: { key: string; asr: Transcriber } | undefined;

async function transcriber(m: ToThread): Promise<Transcriber> {
  // Jobs of one archive share their load settings: the model is loaded for the first and kept.
  const key = JSON.stringify([m.model, m.backend, m.job.load]);
  if (loaded?.key === key) return loaded.asr;
  loaded?.asr.dispose();
  loaded = undefined;
  const l = m.job.load;
  const asr = await loadTranscriber({
    model: m.model,
    backend: m.backend,
    policy: m.job.options.policy,
    budget: m.job.options.budget,
    kvPrecision: l.kv,
    weightFormat: l.weights,
    ...(l.audioEncoder ? { audioEncoder: l.audioEncoder } : {}),
    ...(l.audioWeights ? { audioWeightFormat: l.audioWeights } : {}),
  });
  loaded = { key, asr };
  return asr;
}

port.on('message', (m: ToThread) => {
  void (async () => {
    try {
      const asr = await transcriber(m);
      let last = -1;
      const done = await transcribeRecording(asr, m.job, {
        onProgress: (e) => {
          if (e.phase !== 'decode') return;
          const percent = Math.floor(Math.max(0, Math.min(1, e.fraction)) * 100);
          if (percent !== last) post({ type: 'progress', id: m.id, percent: (last = percent) });
        },
      });
      post({ type: 'done', id: m.id, done });
    } catch (e) {
      post({ type: 'failed', id: m.id, error: serializeError(e) });
    }
  })();
});
