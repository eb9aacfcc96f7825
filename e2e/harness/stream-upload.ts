/**
 * A converted folder loaded by `loadTranscriber` on WebGPU: the decoder is streamed from
 * the shards (no packed copy in the page), transcribes, and after its device is lost the
 * next run streams the weights again (Range requests counted) and gives the same tokens.
 * Exposed as window.wnwStreamUpload.run(folderUrl).
 */
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import type { GpuContext } from '../../src/gpu/device.js';

let rangeReads = 0;
const realFetch = window.fetch.bind(window);
window.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (new Headers(init?.headers).get('range') && url.endsWith('.safetensors')) rangeReads++;
  return realFetch(input, init);
};

function chirp(seconds: number): Float32Array {
  const rate = 16_000;
  const x = new Float32Array(seconds * rate);
  for (let i = 0; i < x.length; i++) x[i] = 0.1 * Math.sin(2 * Math.PI * (200 + i / 400) * (i / rate));
  return x;
}

async function run(url: string) {
  const phases: string[] = [];
  const uploads: { loaded: number; total: number }[] = [];
  const t: WnwTranscriber = await loadTranscriber({
    model: url,
    backend: 'webgpu',
    policy: 'full',
    cache: false,
    onProgress: (e) => {
      if (!phases.includes(e.phase)) phases.push(e.phase);
      if (e.phase === 'upload' && e.bytes) uploads.push(e.bytes);
    },
  });
  const afterLoad = rangeReads;
  const audio = chirp(3);
  const first = await t.transcribe(audio, { maxNewTokens: 8 });
  (t as unknown as { decoder: { ctx: GpuContext } }).decoder.ctx.device.destroy();
  // The loss is said by the run that meets it, as its result's error or thrown, whichever way it is seen.
  const lostError = await t.transcribe(audio, { maxNewTokens: 8 }).then(
    (r) => r.error?.name ?? null,
    (e: unknown) => (e instanceof Error ? e.name : String(e)),
  );
  const beforeRebuild = rangeReads;
  const again = await t.transcribe(audio, { maxNewTokens: 8 });
  const out = {
    backend: t.backendKind,
    phases,
    uploadEvents: uploads.length,
    uploadEnd: uploads.at(-1) ?? null,
    loadRanges: afterLoad,
    firstTokens: first.tokens,
    firstError: first.error?.message ?? null,
    lostError,
    rebuildRanges: rangeReads - beforeRebuild,
    againTokens: again.tokens,
    againError: again.error?.message ?? null,
  };
  t.dispose();
  return out;
}

(window as unknown as { wnwStreamUpload: unknown }).wnwStreamUpload = { run };
document.getElementById('status')!.textContent = 'ready';
