/**
 * `npm run bench -- --session [--minutes 1,10] [--shape voxtral-mini-3b] [--layers 1] [--shape-minutes 1]
 *                  [--cpu-minutes 30] [--requests 20] [--json]`
 *
 * One recording, many requests, measured in one run:
 *  - the reference model (its shipped folder, CPU backend): the time to a request's first
 *    token for a fresh transcription (encode, prefill), and for a recording's second
 *    request (the same transcription again: its whole prompt kept), at each length, and their ratio;
 *  - a real backbone's decoder shape with K layers of random weights: the same two times
 *    from the backend (the prefill and placement, against a rewind and the instruction's
 *    steps), at --shape-minutes (10 minutes is 7,500 audio tokens at Voxtral's shape: its fresh
 *    prefill ran 25 minutes on a 2-core CPU, hence the default of 1);
 *  - the CPU memory a recording holds at that shape and --cpu-minutes under WnW at 0.2:
 *    the offload ArrayBuffers of its tidal heads' copies (each layer placed as the
 *    layer-by-layer prefill places it, from random K/V and scores) and the kept encoding;
 *  - --requests requests on one recording of the reference model: GPU KV bytes and the
 *    JS heap (after a collection) per request, and their largest change after the second.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { toMono16k } from '../audio/decode.js';
import { createBackend } from '../backend/create.js';
import { LayerPlacement } from '../backend/cpu/layer-placement.js';
import { promptLength, kvHeadCount, type ModelConfig } from '../model/config.js';
import { randomArray, randomEmbeddings, rng } from '../model/testing.js';
import { policyLayout } from '../kv/prompt.js';
import { createPolicy } from '../policy/registry.js';
import { loadTranscriber } from '../transcribe/transcriber.js';
import { GROWTH_PAGES_PER_HEAD } from '../kv/sizing.js';
import { DECODER_SHAPES, randomPackedWeights, shapeConfig } from './shapes.js';
import { syntheticHeads } from './decode.js';

const now = () => performance.now();

function value(argv: string[], name: string, dflt: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
}

/** 16 kHz speech of `minutes`: the calibration recordings one after another, repeated. */
async function speech(minutes: number): Promise<Float32Array> {
  const dir = 'calibration-data';
  const clips = await Promise.all(
    readdirSync(dir)
      .filter((f) => f.endsWith('.wav'))
      .sort()
      .map(async (f) => toMono16k(new Uint8Array(readFileSync(join(dir, f))))),
  );
  const out = new Float32Array(Math.round(minutes * 60 * 16000));
  for (let at = 0, i = 0; at < out.length; i++) {
    const c = clips[i % clips.length].subarray(0, out.length - at);
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** A JS heap collection, for heap figures that hold only what is reachable. */
function collect(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

interface FirstTokenRow {
  model: string;
  backend: string;
  minutes: number;
  audioTokens: number;
  /** ms to the first token of a fresh request: encode (reference model) and whole-prompt prefill. */
  freshMs: number;
  /** ms to the first token of a recording's second request: its own ids on the kept KV. */
  secondMs: number;
  ratio: number;
  reusedPositions: number;
  prefilledPositions: number;
}

async function referenceFirstTokens(model: string, minutes: number[], log: (s: string) => void) {
  const rows: FirstTokenRow[] = [];
  const asr = await loadTranscriber({ model, backend: 'cpu', policy: 'full' });
  try {
    for (const m of minutes) {
      const audio = await speech(m);
      const timed = async (
        run: (onToken: () => void) => Promise<{
          stats: { prompt: { reusedPositions: number; prefilledPositions: number }; audioTokens: number };
        }>,
      ) => {
        const t0 = now();
        let first = NaN;
        const r = await run(() => void (Number.isNaN(first) && (first = now() - t0)));
        return { ms: first, r };
      };
      const fresh = await timed((onToken) => asr.transcribe(audio, { maxNewTokens: 4, onToken }));
      const rec = await asr.open(audio);
      await rec.transcribe({ maxNewTokens: 4 });
      const second = await timed((onToken) => rec.transcribe({ maxNewTokens: 4, onToken }));
      rec.dispose();
      const row: FirstTokenRow = {
        model: 'reference model',
        backend: asr.backend,
        minutes: m,
        audioTokens: second.r.stats.audioTokens,
        freshMs: fresh.ms,
        secondMs: second.ms,
        ratio: second.ms / fresh.ms,
        ...second.r.stats.prompt,
      };
      log(
        `session: reference model ${m} min: first token fresh ${fresh.ms.toFixed(0)} ms, second request ${second.ms.toFixed(1)} ms (${(row.ratio * 100).toFixed(2)}%)`,
      );
      rows.push(row);
    }
  } finally {
    asr.dispose();
  }
  return rows;
}

/** The backend at a backbone's decoder shape: whole-prompt prefill and placement against a rewind and the instruction's steps. */
async function shapeFirstTokens(shape: string, layers: number, minutes: number[], log: (s: string) => void) {
  const c = shapeConfig(shape, layers);
  const backend = await createBackend(c, randomPackedWeights(c, 'q4'), { weightFormat: 'q4' });
  const rows: FirstTokenRow[] = [];
  try {
    for (const m of minutes) {
      const N = Math.round(m * 60 * c.audio.tokensPerSecond);
      const policy = createPolicy('full', { budget: 1 });
      const layout = policyLayout(c, N);
      const t0 = now();
      const pre = await backend
        .open({ audioLength: N, maxNewTokens: c.instruction.length + 4, request: policy.request(layout) })
        .prefill(randomEmbeddings(c, N, 3));
      const session = await pre.place(policy.prefill(pre.observation));
      const freshMs = now() - t0;
      await session.step(pre.token);
      const t1 = now();
      const fork = promptLength(c, N) - c.instruction.length;
      await session.rewind(fork);
      for (const id of c.instruction) await session.step(id);
      const secondMs = now() - t1;
      session.close();
      const row = {
        model: `${shape} decoder shape, ${layers} of ${DECODER_SHAPES[shape].totalLayers} layers, q4`,
        backend: backend.label,
        minutes: m,
        audioTokens: N,
        freshMs,
        secondMs,
        ratio: secondMs / freshMs,
        reusedPositions: fork,
        prefilledPositions: c.instruction.length,
      };
      log(
        `session: ${row.model} ${m} min: first token fresh ${freshMs.toFixed(0)} ms, second request ${secondMs.toFixed(1)} ms (${(row.ratio * 100).toFixed(2)}%)`,
      );
      rows.push(row);
    }
  } finally {
    backend.dispose();
  }
  return rows;
}

/**
 * The CPU memory of a recording at a backbone's shape under WnW at 0.2 (f16 KV): every
 * layer placed as the layer-by-layer prefill places it, from random K/V and scores.
 */
function recordingCpuBytes(shape: string, minutes: number) {
  const c = shapeConfig(shape, DECODER_SHAPES[shape].totalLayers);
  const N = Math.round(minutes * 60 * c.audio.tokensPerSecond);
  const policy = createPolicy('wnw', { budget: 0.2, heads: syntheticHeads(c, N) });
  const layout = policyLayout(c, N);
  const run = policy.prefillByLayer!(layout);
  const prompt = { prefix: c.prefix, instruction: c.instruction };
  const placement = new LayerPlacement(c, N, run, {
    elementBytes: 2,
    growth: { growPages: GROWTH_PAGES_PER_HEAD },
    prefillQueries: policy.request(layout).prefillQueries,
    prefillKeys: false,
    hold: () => {},
    prompt,
  });
  const n = promptLength(c, N);
  const kvd = c.numKvHeads * c.headDim;
  const r = rng(5);
  collect();
  const before = process.memoryUsage();
  for (let l = 0; l < c.numLayers; l++) {
    const k = randomArray(n * kvd, 1, r);
    const v = randomArray(n * kvd, 1, r);
    const scores = Array.from({ length: kvHeadCount(c) }, () => randomArray(N, 1, r).map(Math.abs));
    placement.place(
      l,
      k,
      v,
      new Map([[policy.request(layout).prefillQueries, scores]]),
      new Float32Array(c.numHeads * c.headDim),
    );
  }
  run.finish();
  collect();
  const after = process.memoryUsage();
  const st = placement.residency.stats();
  return {
    model: `${shape} decoder shape, ${c.numLayers} layers, WnW at 0.2, f16 KV`,
    minutes,
    audioTokens: N,
    rGpu: st.rGpu,
    rGpuCpu: st.rGpuCpu,
    /** The tidal heads' rows in the offload store (ArrayBuffer chunks). */
    offloadBytes: placement.residency.offload.allocatedBytes,
    offloadRowBytes: st.cpuBytes,
    /** The process's ArrayBuffers and JS heap grown by the placement (the pool's pages and the offload's index included). */
    processBytes: after.arrayBuffers - before.arrayBuffers + (after.heapUsed - before.heapUsed),
    /** The encoding a recording keeps to prefill again under another policy ([N, hidden] f32). */
    encodingBytes: N * c.hiddenSize * 4,
  };
}

async function requestsOnOneRecording(model: string, requests: number, log: (s: string) => void) {
  const asr = await loadTranscriber({ model, backend: 'cpu', policy: 'wnw', budget: 0.2 });
  try {
    const rec = await asr.open(await speech(1));
    const gpu: number[] = [];
    const heap: number[] = [];
    for (let i = 0; i < requests; i++) {
      const r = await rec.transcribe({ maxNewTokens: 24 });
      gpu.push(r.stats.kv.gpuKvBytes);
      collect();
      heap.push(process.memoryUsage().heapUsed);
    }
    rec.dispose();
    const drift = (a: number[]) => Math.max(...a.slice(2).map((x) => Math.abs(x - a[1]) / a[1]));
    const row = {
      requests,
      policy: 'wnw@0.2',
      gpuKvBytes: gpu,
      heapBytes: heap,
      gpuDrift: drift(gpu),
      heapDrift: drift(heap),
    };
    log(
      `session: ${requests} requests on one recording: GPU KV bytes drift ${(row.gpuDrift * 100).toFixed(2)}%, heap ${(row.heapDrift * 100).toFixed(2)}% after the second`,
    );
    return row;
  } finally {
    asr.dispose();
  }
}

export async function sessionBenchMain(argv: string[], log: (s: string) => void): Promise<void> {
  const model = value(argv, 'model', 'public/models/wnw-ref');
  const minutes = value(argv, 'minutes', '1,10').split(',').map(Number);
  const shape = value(argv, 'shape', 'voxtral-mini-3b');
  const layers = Number(value(argv, 'layers', '1'));
  const shapeMinutes = value(argv, 'shape-minutes', '1').split(',').map(Number);
  const cpuMinutes = Number(value(argv, 'cpu-minutes', '30'));
  const requests = Number(value(argv, 'requests', '20'));
  if (!DECODER_SHAPES[shape])
    throw new RangeError(
      `unknown decoder shape ${JSON.stringify(shape)}; known: ${Object.keys(DECODER_SHAPES).join(', ')}`,
    );
  // First, while the process holds nothing else that a collection could free under it.
  const cpu = recordingCpuBytes(shape, cpuMinutes);
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;
  const firstToken = [
    ...(await referenceFirstTokens(model, minutes, log)),
    ...(await shapeFirstTokens(shape, layers, shapeMinutes, log)),
  ];
  log(
    `session: ${cpu.model}, ${cpuMinutes} min: offload ${gib(cpu.offloadBytes)} (rows ${gib(cpu.offloadRowBytes)}), process grew ${gib(cpu.processBytes)}, encoding ${gib(cpu.encodingBytes)}`,
  );
  const many = await requestsOnOneRecording(model, requests, log);
  const report = { firstToken, cpu, requests: many };
  if (argv.includes('--json')) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  console.log(
    '| model | backend | minutes | audio tokens | first token, fresh (ms) | first token, second request (ms) | second / fresh |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const r of firstToken)
    console.log(
      `| ${r.model} | ${r.backend} | ${r.minutes} | ${r.audioTokens} | ${r.freshMs.toFixed(0)} | ${r.secondMs.toFixed(1)} | ${(r.ratio * 100).toFixed(2)}% |`,
    );
  console.log(
    `\n${cpu.model}, ${cpu.minutes} min (${cpu.audioTokens} audio tokens, r_GPU ${cpu.rGpu.toFixed(3)}, r_GPU+CPU ${cpu.rGpuCpu.toFixed(3)}): ` +
      `offload ArrayBuffers ${gib(cpu.offloadBytes)}, process memory grown by the placement ${gib(cpu.processBytes)}, kept encoding ${gib(cpu.encodingBytes)}.`,
  );
  console.log(
    `\n${many.requests} requests on one recording (${many.policy}): GPU KV bytes within ${(many.gpuDrift * 100).toFixed(2)}% of the second request's, JS heap within ${(many.heapDrift * 100).toFixed(2)}%.`,
  );
}
