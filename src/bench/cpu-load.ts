/**
 * `npm run bench -- --cpu-load MODEL_DIR [--seconds 5] [--tokens 4] [--weights q4] [--host-memory BYTES]`:
 * what loading a model on the CPU backend costs in host memory and time, and what a decode
 * step costs after it: the transcriber loads MODEL_DIR (a converted folder keeps its format;
 * an upstream one is packed to --weights as it is read) and transcribes a clip of --seconds
 * (a quiet tone: the tokens are whatever the model makes of it) for --tokens tokens, with the
 * full cache. Prints one JSON object: peak RSS (the OS's maximum resident set of this
 * process), the decoder weight bytes as held, the KV bytes at the end, RSS / (weights + KV),
 * load seconds and seconds per decode step. With --host-memory below what the load needs, it
 * prints the MODEL_TOO_BIG error the fit check gives before any weight is read, and exits 2.
 *
 * For a full-size model without downloading one:
 *   python3 scripts/voxtral-full.py --out /work/bigmodel/voxtral-full-bf16
 *   node bin/wnw.mjs convert /work/bigmodel/voxtral-full-bf16 /work/bigmodel/voxtral-full-q4 --quant q4
 *   npm run bench -- --cpu-load /work/bigmodel/voxtral-full-q4
 */
import { loadTranscriber } from '../transcribe/transcriber.js';
import { WnwError } from '../errors.js';
import { parseWeightFormat } from '../cli/args.js';

function arg(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** The process's peak resident set so far, bytes (Linux reports KiB). */
function peakRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}

export async function cpuLoadBenchMain(argv: string[], log: (s: string) => void): Promise<void> {
  const model = arg(argv, 'cpu-load');
  if (!model || model.startsWith('--'))
    throw new Error(
      'usage: npm run bench -- --cpu-load MODEL_DIR [--seconds 5] [--tokens 4] [--weights q4] [--host-memory BYTES]',
    );
  const seconds = Number(arg(argv, 'seconds') ?? '5');
  const tokens = Number(arg(argv, 'tokens') ?? '4');
  const weights = arg(argv, 'weights');
  const hostMemory = arg(argv, 'host-memory');
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  let asr;
  try {
    asr = await loadTranscriber({
      model,
      backend: 'cpu',
      policy: 'full',
      audioSeconds: seconds,
      ...(weights ? { weightFormat: parseWeightFormat(weights) } : {}),
      ...(hostMemory ? { hostMemoryBytes: Number(hostMemory) } : {}),
      onProgress: (e) => {
        if (e.fraction === 1) log(`cpu-load: ${e.phase}: ${e.detail}`);
      },
    });
  } catch (e) {
    if (e instanceof WnwError && e.code === 'MODEL_TOO_BIG') {
      // The refusal comes before a weight byte is read: the peak is still the process's own.
      console.log(
        JSON.stringify(
          { model, refused: e.code, message: e.message, peakRssBytes: peakRss(), rssBeforeBytes: rssBefore },
          null,
          1,
        ),
      );
      process.exitCode = 2;
      return;
    }
    throw e;
  }
  const loadSeconds = (performance.now() - t0) / 1000;
  const rssAfterLoad = process.memoryUsage().rss;
  const peakAfterLoad = peakRss();
  log(`cpu-load: loaded in ${loadSeconds.toFixed(1)} s; RSS ${(rssAfterLoad / 2 ** 30).toFixed(2)} GiB`);
  const sr = 16000;
  const clip = new Float32Array(Math.round(seconds * sr));
  for (let i = 0; i < clip.length; i++) clip[i] = 0.05 * Math.sin((2 * Math.PI * 220 * i) / sr);
  const t1 = performance.now();
  const r = await asr.transcribe(clip, { maxNewTokens: tokens });
  const runSeconds = (performance.now() - t1) / 1000;
  const weightBytes = asr.model.weightBytes;
  const kvBytes = r.stats.kv.gpuKvBytes + r.stats.kv.cpuKvBytes;
  const peak = peakRss();
  console.log(
    JSON.stringify(
      {
        model,
        backend: r.stats.backend,
        weightFormat: asr.model.packed?.format ?? 'f32',
        audioSeconds: r.stats.audioSeconds,
        audioTokens: r.stats.audioTokens,
        decodeSteps: r.stats.decodeSteps,
        peakRssBytes: peak,
        peakRssAfterLoadBytes: peakAfterLoad,
        rssBeforeLoadBytes: rssBefore,
        rssAfterLoadBytes: rssAfterLoad,
        weightBytes,
        kvBytes,
        rssOverWeightsAndKv: peak / (weightBytes + kvBytes),
        loadSeconds,
        encodeSeconds: r.stats.timing.encodeMs / 1000,
        prefillSeconds: r.stats.timing.prefillMs / 1000,
        secondsPerToken: r.stats.timing.msPerToken / 1000,
        transcribeSeconds: runSeconds,
      },
      null,
      1,
    ),
  );
  asr.dispose();
}
