/**
 * Entry of the demo page. The engine runs in a Web Worker so that decoding never blocks
 * the page; `?worker=0` runs it on the main thread instead, and a worker that cannot
 * start at all falls back to the main thread on its own. `?model=URL` picks the model.
 * A model folder picked from disk loads on the main thread: its File objects are
 * registered in this page's realm (`openLocalFolder`), which a worker does not share.
 */
import './style.css';
import { wer } from '../research.js';
import { loadTranscriberInWorker, toMono16k, type LoadOptions, type Transcriber } from '../index.js';
import { App } from './app.js';
import { siteUrl } from './audio-input.js';

const params = new URLSearchParams(location.search);
let useWorker = params.get('worker') !== '0' && typeof Worker !== 'undefined';

async function load(options: LoadOptions, inPage = false): Promise<Transcriber> {
  if (useWorker && !inPage) {
    try {
      return await loadTranscriberInWorker(options);
    } catch (e) {
      // A typed error (bad model, no WebGPU, ...) would fail the same way here: show it.
      if (typeof e === 'object' && e !== null && 'code' in e) throw e;
      console.warn('wnw: the worker could not run the transcriber; running it on the page instead.', e);
      useWorker = false;
    }
  }
  return (await import('../index.js')).loadTranscriber(options);
}

const app = new App({
  load,
  decode: (blob) => toMono16k(blob),
  wer,
  modelUrl: params.has('model') ? new URL(params.get('model')!, location.href).href : siteUrl('models/wnw-ref/').href,
  ...(params.has('model') ? { modelLabel: params.get('model')! } : {}),
  sampleRate: 16000,
});
// For the console and the e2e tests; nothing in the page depends on it.
(globalThis as unknown as { wnwDemo: App }).wnwDemo = app;
