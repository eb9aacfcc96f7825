/**
 * The demo's "calibrate for WnW", in a dedicated Web Worker: calibration is minutes of
 * plain-TypeScript forwards that never yield, so it must not run on the page (or in the
 * transcription worker, which would then answer nothing until it ends). The page side is
 * browser.ts. A folder picked from disk crosses as its File objects (they clone into a
 * worker) and is registered here under the same name, so its stored heads.json gets the
 * same key as on the page. Finished clips are kept in OPFS after each one: a stop (the page
 * ends the worker) loses only the clip under way, and the next run resumes.
 */
import { loadModel } from '../model/loader.js';
import { registerLocalFolder } from '../model/local-folder.js';
import { headsStoreKey, storeHeads, storedPartial } from '../model/heads-store.js';
import { createAudioRoute } from '../route/audio-route.js';
import { serializeError } from '../worker/protocol.js';
import { calibrateClips, type ClipSource, type PartialFile, type PartialStore } from './runtime.js';
import type { CalibrateRequest, FromCalibrateWorker, WireClip } from './protocol.js';

interface Scope {
  postMessage(message: FromCalibrateWorker): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<CalibrateRequest>) => void): void;
}
const scope = self as unknown as Scope;
const post = (m: FromCalibrateWorker) => scope.postMessage(m);

/** The clips as the runtime reads them: the site's set by URL, the user's as Files. */
function clipSource(c: WireClip): ClipSource {
  const read = async () => {
    if (c.audio instanceof Blob) return new Uint8Array(await c.audio.arrayBuffer());
    const res = await fetch(c.audio);
    if (!res.ok) throw new Error(`${c.audio}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  };
  return {
    id: c.id,
    text: c.text,
    words: c.words,
    ...(c.tokens ? { tokens: c.tokens } : {}),
    ...(c.seconds ? { seconds: c.seconds } : {}),
    read,
  };
}

async function run(m: CalibrateRequest): Promise<void> {
  const t0 = performance.now();
  const base = m.model.kind === 'url' ? m.model.url : registerLocalFolder(m.model.name, m.model.files);
  post({ type: 'status', text: 'Loading the model (f32, CPU reference decoder)…' });
  const model = await loadModel(base, undefined, { language: m.language, cache: false });
  post({ type: 'status', text: 'Loading the audio encoder…' });
  const route = await createAudioRoute(model, { file: `${base}encoder.onnx` });
  try {
    const key = await headsStoreKey(base);
    const kept = key ? storedPartial(key) : null;
    const store: PartialStore | undefined = kept
      ? { load: async () => (await kept.load()) as PartialFile | null, save: kept.save, clear: kept.clear }
      : undefined;
    post({
      type: 'status',
      text: `Calibrating ${model.config.numLayers} × ${model.config.numKvHeads} KV heads on ${m.clips.length} clip${m.clips.length === 1 ? '' : 's'}…`,
    });
    const heads = await calibrateClips(model, (s) => route.encode(s), m.clips.map(clipSource), {
      directions: m.directions,
      store,
      onProgress: (p) => post({ type: 'progress', progress: p }),
    });
    if (!heads) throw new Error('calibration stopped');
    const stored = await storeHeads(base, heads);
    post({ type: 'done', heads, stored, seconds: (performance.now() - t0) / 1000 });
  } finally {
    await route.dispose();
  }
}

scope.addEventListener('message', (e) => {
  run(e.data).catch((err: unknown) => post({ type: 'failed', error: serializeError(err) }));
});
