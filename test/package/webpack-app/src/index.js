// webpack 5 with no configuration (`webpack --mode production`): the package's worker is
// found through the `new Worker(new URL('./worker.js', import.meta.url))` in its code.
import { loadTranscriberInWorker, WnwError } from 'wnw';

const out = document.getElementById('out');

async function run() {
  const asr = await loadTranscriberInWorker({ model: '/models/wnw-ref', backend: 'cpu' });
  try {
    const r = await asr.transcribe(await (await fetch('/clip.wav')).arrayBuffer());
    return { text: r.text, backend: asr.backend, webgpu: 'gpu' in navigator };
  } finally {
    asr.dispose();
  }
}

run().then(
  (r) => {
    out.textContent = JSON.stringify(r);
    document.title = 'done';
  },
  (e) => {
    const error = e instanceof WnwError ? `${e.code}: ${e.message}` : String(e);
    out.textContent = JSON.stringify({ error, webgpu: 'gpu' in navigator });
    document.title = 'done';
  },
);
