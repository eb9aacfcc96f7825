// A page as a new user writes it from the README: the package's public entry, nothing else.
// ?how=thread|worker picks the loader, ?backend=auto|cpu|webgpu the decoder's backend.
import { loadTranscriber, loadTranscriberInWorker, WnwError, type LoadOptions, type Transcriber } from 'wnw';

interface Outcome {
  text?: string;
  backend?: string;
  backendReason?: string | null;
  audioRoute?: string;
  encodeMs?: number;
  webgpu: boolean;
  error?: string;
}

const params = new URLSearchParams(location.search);
const how = params.get('how') ?? 'thread';
const backend = (params.get('backend') ?? 'auto') as NonNullable<LoadOptions['backend']>;

async function run(): Promise<Outcome> {
  const options: LoadOptions = { model: '/models/wnw-ref', backend };
  const asr: Transcriber = how === 'worker' ? await loadTranscriberInWorker(options) : await loadTranscriber(options);
  try {
    const audio = await (await fetch('/clip.wav')).arrayBuffer();
    const r = await asr.transcribe(audio);
    // The in-thread transcriber also says where its encoder ran.
    const route = (asr as { audioRoute?: unknown }).audioRoute;
    return {
      text: r.text,
      backend: asr.backend,
      backendReason: asr.backendReason,
      audioRoute: typeof route === 'string' ? route : undefined,
      encodeMs: r.stats.timing.encodeMs,
      webgpu: 'gpu' in navigator,
    };
  } finally {
    asr.dispose();
  }
}

const out = document.getElementById('out')!;
run().then(
  (r) => {
    out.textContent = JSON.stringify(r);
    document.title = 'done';
  },
  (e: unknown) => {
    const error = e instanceof WnwError ? `${e.code}: ${e.message}` : String(e);
    out.textContent = JSON.stringify({ error, webgpu: 'gpu' in navigator });
    document.title = 'done';
  },
);
