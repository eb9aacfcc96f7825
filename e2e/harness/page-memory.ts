/**
 * The page side of `npm run bench -- --page-memory` (src/bench/page-memory.ts): loads a
 * model folder on the WebGPU backend, then transcribes a synthetic clip that the Node side
 * stops once it has sampled the processes' memory, or triages the model's heads on the
 * first clips of calibration-data/ (`calibrate`). Exposed as window.wnwPageMemory.
 */
import { loadTranscriber, type Transcriber } from '../../src/index.js';
import type { ProgressEvent } from '../../src/types.js';
import { siteClips } from './site-clips.js';

let transcriber: Transcriber | null = null;
let running: { abort: AbortController; done: Promise<string>; over: boolean } | null = null;
const events: string[] = [];

async function load(req: { model: string; cache: boolean; policy: 'full' | 'wnw' }) {
  const t0 = performance.now();
  let last = '';
  const phases = new Set<string>();
  transcriber = await loadTranscriber({
    model: req.model,
    backend: 'webgpu',
    cache: req.cache,
    policy: req.policy,
    onProgress: (e: ProgressEvent) => {
      phases.add(e.phase);
      const line = `${e.phase} ${e.detail}`;
      if (line !== last) events.push(`${((performance.now() - t0) / 1000).toFixed(1)}s ${line}`);
      last = line;
    },
  });
  return { seconds: (performance.now() - t0) / 1000, phases: [...phases], events: events.splice(0) };
}

/** A load that fills the weight cache, released at once (so the measured load reads the cache). */
async function fill(req: { model: string; cache: boolean; policy: 'full' | 'wnw' }) {
  const r = await load(req);
  transcriber?.dispose();
  transcriber = null;
  return r;
}

/**
 * Starts transcribing `seconds` of a quiet chirp (what it says does not matter: the encoder
 * and decoder run), or with `calibrate` > 0 the head triage on that many site clips.
 */
function start(req: { seconds: number; maxNewTokens: number; calibrate: number }) {
  if (!transcriber) throw new Error('load first');
  const t = transcriber;
  if (req.calibrate > 0) {
    const abort = new AbortController();
    const t0 = performance.now();
    const ids = Array.from({ length: req.calibrate }, (_, i) => `calib${String(i + 1).padStart(3, '0')}`);
    const done = siteClips(ids)
      .then((clips) =>
        t.calibrate(clips, {
          signal: abort.signal,
          onProgress: (p) =>
            p.finished && events.push(`clip ${p.clip} of ${p.clips} in ${p.finished.seconds.toFixed(1)} s`),
        }),
      )
      .then(
        (r) =>
          `triaged in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${r.heads.roles['0.2']?.anchors.length} anchors at 0.2`,
        (e: unknown) => `ended: ${e instanceof Error ? e.message : String(e)}`,
      );
    running = { abort, done, over: false };
    void done.then(() => running && (running.over = true));
    return;
  }
  const rate = 16_000;
  const x = new Float32Array(req.seconds * rate);
  for (let i = 0; i < x.length; i++) x[i] = 0.1 * Math.sin(2 * Math.PI * (200 + i / 400) * (i / rate));
  const abort = new AbortController();
  const done = transcriber
    .transcribe(x, {
      signal: abort.signal,
      maxNewTokens: req.maxNewTokens,
      onProgress: (e) => void events.push(`${e.phase} ${e.detail}`),
    })
    .then(
      (r) => `finished: ${JSON.stringify(r.text.slice(0, 60))}`,
      (e: unknown) => `ended: ${e instanceof Error ? e.message : String(e)}`,
    );
  running = { abort, done, over: false };
}

/** Whether the started work is still going. */
function isRunning() {
  return !!running && !running.over;
}

async function stop() {
  running?.abort.abort();
  const how = (await running?.done) ?? 'not started';
  running = null;
  return { how, events: events.splice(0) };
}

function progress() {
  return events.slice(-3);
}

(window as unknown as { wnwPageMemory: unknown }).wnwPageMemory = {
  load,
  fill,
  start,
  stop,
  progress,
  running: isRunning,
};
document.getElementById('status')!.textContent = 'ready';
