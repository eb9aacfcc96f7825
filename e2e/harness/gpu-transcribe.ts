/**
 * Transcription from a Hugging Face folder in the browser, end to end: the page loads each
 * miniature by URL through `loadTranscriber` (config, tokenizer and prompt, shards by HTTP
 * Range), turns real speech into audio embeddings with the folder's audio tower (on
 * WebGPU next to the WebGPU decoder, on the CPU next to the CPU one), and decodes; the
 * embeddings and the greedy tokens of the two must agree.
 * Exposed as window.wnwTranscribe; the page is opened as gpu-transcribe.html?hf=<URL path
 * of the folder holding the miniatures>.
 */
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';
import { joinModelPath } from '../../src/model/files.js';
import type { PolicyName, ProgressEvent } from '../../src/types.js';
import type { WeightFormat } from '../../src/model/quant.js';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

const SECONDS = 3;
const STEPS = 24;

let speech: Promise<Float32Array> | null = null;
function clip(): Promise<Float32Array> {
  speech ??= fetch('/samples/sample1.wav').then(async (r) =>
    downmix(parseWav(new Uint8Array(await r.arrayBuffer())).channels).slice(0, SECONDS * 16000),
  );
  return speech;
}

function nmse(a: Float32Array, b: Float32Array): number {
  let se = 0;
  let ss = 0;
  for (let i = 0; i < b.length; i++) {
    se += (a[i] - b[i]) ** 2;
    ss += b[i] ** 2;
  }
  return se / ss;
}

const same = (a: number[], b: number[]) => a.length === b.length && a.every((t, i) => t === b[i]);

/**
 * Both backends transcribe the clip (the WebGPU one encodes on WebGPU); the embeddings of
 * the two encoders must agree (NMSE <= 1e-6, the encoder tests' bound), and the greedy
 * tokens must be identical, from the whole WebGPU run and from the WebGPU decoder fed the
 * CPU encoder's embeddings.
 */
async function transcribeBoth(family: string, weightFormat: WeightFormat): Promise<CheckResult> {
  const name = `transcribe_hf_${family}${weightFormat === 'f32' ? '' : `_${weightFormat}`}`;
  const root = new URLSearchParams(location.search).get('hf');
  if (!root)
    return { name, pass: false, detail: 'open the page as gpu-transcribe.html?hf=<URL path of the miniatures>', ms: 0 };
  const t0 = performance.now();
  const audio = await clip();
  const policy: PolicyName = 'full';
  const events: ProgressEvent[] = [];
  const gpu = await loadTranscriber({
    model: joinModelPath(root, family),
    backend: 'webgpu',
    policy,
    weightFormat,
    onProgress: (e) => events.push(e),
  });
  const cpu = await loadTranscriber({ model: joinModelPath(root, family), backend: 'cpu', policy, weightFormat });
  try {
    const fail = (detail: string): CheckResult => ({ name, pass: false, detail, ms: performance.now() - t0 });
    if (gpu.backendKind !== 'webgpu') return fail(`no WebGPU backend: ${gpu.backend}`);
    if (!gpu.audioRoute.includes('WebGPU')) return fail(`the audio tower did not run on WebGPU: ${gpu.audioRoute}`);
    const phases = loadPhasesProblem(events, weightFormat);
    if (phases) return fail(`load progress: ${phases}`);
    const g = await gpu.transcribe(audio, { maxNewTokens: STEPS });
    const c = await cpu.transcribe(audio, { maxNewTokens: STEPS });
    if (g.error || c.error) return fail(`error: ${(g.error ?? c.error)!.message}`);
    const ge = await gpu.encode(audio);
    const ce = await cpu.encode(audio);
    if (ge.audioLength !== ce.audioLength)
      return fail(`audio tokens ${ge.audioLength} on WebGPU, ${ce.audioLength} on the CPU`);
    const err = nmse(ge.embeddings, ce.embeddings);
    const cross = await gpu.decodeEncoded(ce, { maxNewTokens: STEPS });
    const detail =
      `${gpu.audioRoute} vs ${cpu.audioRoute}: ${ge.audioLength} audio tokens, embeddings NMSE ${err.toExponential(2)}, ` +
      `encode ${g.stats.timing.encodeMs.toFixed(0)} / ${c.stats.timing.encodeMs.toFixed(0)} ms; tokens ${g.tokens.length} (${g.stats.stoppedBy}) / ${c.tokens.length} (${c.stats.stoppedBy})` +
      (same(g.tokens, c.tokens) ? '' : `; WebGPU [${g.tokens}] vs CPU [${c.tokens}]`) +
      (same(cross.tokens, c.tokens) ? '' : `; WebGPU decoder on CPU embeddings [${cross.tokens}]`);
    const pass = err <= 1e-6 && c.tokens.length > 0 && same(g.tokens, c.tokens) && same(cross.tokens, c.tokens);
    return { name, pass, detail, ms: performance.now() - t0 };
  } finally {
    gpu.dispose();
    cpu.dispose();
  }
}

/**
 * The WebGPU load's phases: download, convert (f16/q4 packed at load), then upload with
 * bytes up to the packed weights' total and compile counting pipelines up to all asked
 * for; '' when so, else what is wrong.
 */
function loadPhasesProblem(events: ProgressEvent[], format: WeightFormat): string {
  const of = (phase: ProgressEvent['phase']) => events.filter((e) => e.phase === phase);
  const upload = of('upload');
  const pipelines = of('compile').filter((e) => e.pipelines);
  const convert = of('convert');
  const lastDownload = events.map((e) => e.phase).lastIndexOf('download');
  const full = (done: number, total: number) => total > 0 && done === total;
  const rising = (xs: number[]) => xs.every((x, i) => i === 0 || x >= xs[i - 1]);
  const lastBytes = (xs: ProgressEvent[]) => xs.at(-1)?.bytes ?? { loaded: 0, total: 0 };
  if (!full(lastBytes(upload).loaded, lastBytes(upload).total) || !rising(upload.map((e) => e.bytes!.loaded)))
    return `upload ${JSON.stringify(upload.map((e) => e.bytes))}`;
  if (events.indexOf(upload[0]) < lastDownload) return 'upload began before the download ended';
  const counted = pipelines.at(-1)?.pipelines ?? { compiled: 0, total: 0 };
  if (!full(counted.compiled, counted.total) || new Set(pipelines.map((e) => e.pipelines!.total)).size !== 1)
    return `compile ${JSON.stringify(pipelines.map((e) => e.pipelines))}`;
  if (
    (format !== 'f32') !== convert.length > 0 ||
    (convert.length && !full(lastBytes(convert).loaded, lastBytes(convert).total))
  )
    return `convert ${JSON.stringify(convert.map((e) => e.bytes))}`;
  return '';
}

async function run(name: string): Promise<CheckResult> {
  const [, family, format] = /^transcribe_hf_(.+?)(?:_(f16|q4))?$/.exec(name) ?? [];
  try {
    return await transcribeBoth(family ?? name, (format as WeightFormat | undefined) ?? 'f32');
  } catch (e) {
    const err = e as Error;
    return { name, pass: false, detail: `${err.name}: ${err.message}\n${err.stack ?? ''}`, ms: 0 };
  }
}

import.meta.hot?.accept(() => {});

(window as unknown as { wnwTranscribe: unknown }).wnwTranscribe = { run };
document.getElementById('status')!.textContent = 'ready';
