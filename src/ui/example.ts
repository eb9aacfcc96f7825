/**
 * The minimal page: import the module, load, transcribe one clip, print it. `?clip=URL`
 * picks the clip; otherwise the first entry of the server's sample list.
 */
import { loadTranscriber } from '../index.js';

const status = document.getElementById('status')!;
const out = document.getElementById('out')!;
const params = new URLSearchParams(location.search);

async function firstSample(): Promise<string> {
  const list = (await fetch(`${import.meta.env.BASE_URL}samples.json`).then(
    (r) => (r.ok ? r.json() : []),
    () => [],
  )) as { url: string }[];
  if (!list.length) throw new Error('no sample clips on this server: pass ?clip=URL');
  return list[0].url;
}

async function main(): Promise<void> {
  const clipUrl = params.get('clip') ?? `${import.meta.env.BASE_URL}${await firstSample()}`;
  const asr = await loadTranscriber({
    model: new URL(params.get('model') ?? `${import.meta.env.BASE_URL}models/wnw-ref/`, location.href).href,
    policy: 'wnw',
    budget: 0.2,
    onProgress: (e) => (status.textContent = `Loading the model: ${e.phase} ${Math.round(e.fraction * 100)} %`),
  });
  status.textContent = `Transcribing ${clipUrl} on ${asr.backend}…`;
  const audio = await fetch(clipUrl).then((r) => {
    if (!r.ok) throw new Error(`${clipUrl}: HTTP ${r.status}`);
    return r.arrayBuffer();
  });
  const result = await asr.transcribe(audio, { onToken: (t) => (out.textContent += t) });
  out.textContent = result.text;
  const s = result.stats;
  status.textContent =
    `Done: ${s.audioSeconds.toFixed(1)} s of audio, ${s.decodeSteps} tokens, ` +
    `${s.timing.msPerToken.toFixed(1)} ms/token, r_GPU ${s.kv.rGpu.toFixed(2)}, on ${s.backend}.`;
  document.body.dataset.state = 'done';
  asr.dispose();
}

main().catch((e: unknown) => {
  status.textContent = `Failed: ${e instanceof Error ? e.message : String(e)}`;
  document.body.dataset.state = 'error';
});
