/**
 * `npm run bench -- --calibration-cost [--shape voxtral-mini-3b] [--layers 1] [--audio-tokens 375]
 *                  [--answer 100] [--ce-tokens 8] [--backends cpu,webgpu] [--weights f16] [--reps 2] [--json]`
 * `npm run bench -- --calibration-cost --modelled [--json]`: the default triage's cost at the
 * shape's real size from its FLOPs (cost.ts `triageFlops`), nothing run.
 *
 * What one forward of the runtime's calibration costs at a real backbone's shapes, measured,
 * and what a whole calibration of that model would then take, estimated. A forward of the
 * Head Sensitivity estimator (src/calibrate/sensitivity.ts) is the decoder's layers over
 * the teacher-forced prompt [prefix][audio][instruction][answer] plus the final norm and the
 * lm_head on each answer row (its cross-entropy). Measured here, with K of the model's
 * layers (random weights, the real vocabulary):
 * - cpu: that very forward on the CPU reference decoder (src/reference/, f32), the code the
 *   calibration runs today: the layers, and the CE on `--ce-tokens` rows (each row is one
 *   V × D product, so the CE scales by rows exactly);
 * - webgpu: a prefill forward of the WebGPU backend over the same number of rows (the audio
 *   part holds the answer's rows too), in headless Chromium on SwiftShader where no GPU is
 *   found: the same matrices over the same rows and the same causal attention per layer. The
 *   WebGPU backend has no Head Sensitivity forward of its own yet; this is the cost one would
 *   pay per forward. Its CE rows are costed at the layers' measured FLOP rate.
 * The whole model's forward is then L × (one layer) + CE, and a calibration is
 * forwardsPerClip(L, H_kv, M) of those per clip (src/calibrate/cost.ts).
 */
import { promptLength, type ModelConfig } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';
import { isWeightFormat } from '../model/packed-weights.js';
import { randomDecoderWeights, randomEmbeddings } from '../model/testing.js';
import { prefillLayers } from '../reference/prefill.js';
import { ropeFrequencies } from '../reference/ops.js';
import { answerCe } from '../calibrate/sensitivity.js';
import { DEFAULT_ESTIMATOR, DEFAULT_TRIAGE_CLIPS, forwardsPerClip, headFlops, layerFlops, triageFlops } from '../calibrate/cost.js';

export { layerFlops };
import { DECODER_SHAPES, shapeConfig } from './shapes.js';
import type { GpuForwardRequest, GpuForwardRow } from './calibration-cost-gpu.js';
import type { WeightFormat } from '../index.js';

export interface CostOptions {
  shape: string;
  layers: number;
  audioTokens: number;
  answer: number;
  ceTokens: number;
  backends: string[];
  weights: WeightFormat;
  reps: number;
  json: boolean;
}

function value(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

function count(argv: string[], name: string, dflt: number): number {
  const v = value(argv, name);
  const n = v === undefined ? dflt : Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

export function parseCostArgs(argv: string[]): CostOptions {
  const shape = value(argv, 'shape') ?? Object.keys(DECODER_SHAPES)[0];
  const s = DECODER_SHAPES[shape];
  if (!s)
    throw new RangeError(
      `unknown decoder shape ${JSON.stringify(shape)}; known: ${Object.keys(DECODER_SHAPES).join(', ')}`,
    );
  const layers = count(argv, 'layers', 1);
  if (layers > s.totalLayers) throw new RangeError(`--layers must be 1..${s.totalLayers}`);
  const weights = value(argv, 'weights') ?? 'f16';
  if (!isWeightFormat(weights))
    throw new RangeError(`--weights must be f32, f16 or q4, got ${JSON.stringify(weights)}`);
  return {
    shape,
    layers,
    weights,
    json: argv.includes('--json'),
    audioTokens: count(argv, 'audio-tokens', 375),
    answer: count(argv, 'answer', 100),
    ceTokens: count(argv, 'ce-tokens', 8),
    reps: count(argv, 'reps', 2),
    backends: (value(argv, 'backends') ?? 'cpu,webgpu').split(','),
  };
}

/** FLOPs of the CE on T answer rows: the lm_head's V × D product per row. */
export const ceFlops = headFlops;

export interface ModelledTriage {
  shape: string;
  clips: number;
  forwards: number;
  /** The triage's FLOPs a clip (its forward and the answer rows' backward) per forward a clip. */
  tflopPerForward: number;
  /** Minutes of the whole triage at a sustained 2 and 10 TFLOP/s. */
  minutesAt: { '2': number; '10': number };
}

/** The default triage's cost at a shape's real size, from its FLOPs alone: nothing runs. */
export function modelledTriage(o: Pick<CostOptions, 'shape' | 'audioTokens' | 'answer'>): ModelledTriage {
  const c = shapeConfig(o.shape, DECODER_SHAPES[o.shape].totalLayers);
  const n = promptLength(c, o.audioTokens) + o.answer - 1;
  const perClip = triageFlops(c, n, o.answer, o.audioTokens);
  const clips = DEFAULT_TRIAGE_CLIPS;
  const forwards = forwardsPerClip(c, DEFAULT_ESTIMATOR, 0);
  const minutes = (tflops: number) => (clips * perClip) / (tflops * 1e12) / 60;
  return {
    shape: o.shape,
    clips,
    forwards: clips * forwards,
    tflopPerForward: perClip / forwards / 1e12,
    minutesAt: { '2': minutes(2), '10': minutes(10) },
  };
}

/** K layers of random f32 weights; the V × D embedding and lm_head filled by a cheap hash (their values do not change the time). */
function cpuWeights(c: ModelConfig): DecoderWeights {
  const small = randomDecoderWeights({ ...c, vocabSize: 256 }, 1);
  const table = () => {
    const a = new Float32Array(c.vocabSize * c.hiddenSize);
    for (let i = 0; i < a.length; i++) a[i] = ((Math.imul(i, 2654435761) >>> 0) / 2 ** 32 - 0.5) * 0.05;
    return a;
  };
  return { ...small, embed: table(), lmHead: table() };
}

export interface CpuForwardRow {
  layers: number;
  positions: number;
  /** The K layers over the teacher-forced prompt, ms. */
  layersMs: number;
  /** The CE per answer row (final norm, lm_head, log-sum-exp), ms. */
  ceMsPerRow: number;
}

/** One HS forward on the CPU reference, as sensitivity.ts runs it (no attention kept, the answer appended). */
export function measureCpuForward(o: CostOptions): CpuForwardRow {
  const c = shapeConfig(o.shape, o.layers);
  const w = cpuWeights(c);
  const N = o.audioTokens;
  const answer = Array.from({ length: o.answer }, (_, i) => 5 + (i % 200));
  const audio = randomEmbeddings(c, N, 5);
  const t0 = performance.now();
  const out = prefillLayers(
    c,
    w,
    ropeFrequencies(c.headDim, c.ropeTheta),
    audio,
    N,
    { decodeHeads: [], prefillQueries: 0 },
    { suffix: answer.slice(0, -1), keepKv: false },
  );
  const t1 = performance.now();
  const first = promptLength(c, N) - 1;
  answerCe(c, w, out.hidden, first, answer.slice(0, o.ceTokens));
  const t2 = performance.now();
  return {
    layers: o.layers,
    positions: promptLength(c, N) + o.answer - 1,
    layersMs: t1 - t0,
    ceMsPerRow: (t2 - t1) / o.ceTokens,
  };
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

export interface CostReport {
  shape: string;
  totalLayers: number;
  numKvHeads: number;
  positions: number;
  answer: number;
  flopsPerLayer: number;
  flopsCe: number;
  flopsPerForward: number;
  cpu?: CpuForwardRow & { msPerLayer: number; gflops: number; msPerForward: number };
  webgpu?: GpuForwardRow & { msPerLayer: number; gflops: number; msPerForward: number };
}

export async function runCalibrationCost(o: CostOptions, log: (s: string) => void): Promise<CostReport> {
  const L = DECODER_SHAPES[o.shape].totalLayers;
  const c = shapeConfig(o.shape, L);
  const n = promptLength(c, o.audioTokens) + o.answer - 1;
  const flopsPerLayer = layerFlops(c, n);
  const flopsCe = ceFlops(c, o.answer);
  const r: CostReport = {
    shape: o.shape,
    totalLayers: L,
    numKvHeads: c.numKvHeads,
    positions: n,
    answer: o.answer,
    flopsPerLayer,
    flopsCe,
    flopsPerForward: L * flopsPerLayer + flopsCe,
  };
  if (o.backends.includes('cpu')) {
    log(`bench: CPU reference, ${o.layers} layer(s) over ${n} rows…`);
    const m = measureCpuForward(o);
    const msPerLayer = m.layersMs / o.layers;
    r.cpu = {
      ...m,
      msPerLayer,
      gflops: flopsPerLayer / msPerLayer / 1e6,
      msPerForward: L * msPerLayer + o.answer * m.ceMsPerRow,
    };
    log(`bench: CPU ${msPerLayer.toFixed(0)} ms per layer, ${m.ceMsPerRow.toFixed(0)} ms per CE row`);
  }
  if (o.backends.includes('webgpu')) {
    const { onHarnessPage } = await import('./webgpu.js');
    // The answer's rows join the audio part: the prefill then runs the layers over as many rows as the HS forward.
    const req: GpuForwardRequest = {
      shape: o.shape,
      layers: o.layers,
      audioTokens: o.audioTokens + o.answer - 1,
      weights: o.weights,
      reps: o.reps,
    };
    log(`bench: WebGPU prefill, ${o.layers} layer(s) over ${n} rows, ${o.weights} weights…`);
    const g = await onHarnessPage(log, (page) =>
      page.evaluate(
        (q) => (window as unknown as { wnwGpuForward(q: unknown): Promise<GpuForwardRow> }).wnwGpuForward(q),
        req,
      ),
    );
    if (g) {
      const msPerLayer = median(g.ms) / o.layers;
      const gflops = flopsPerLayer / msPerLayer / 1e6;
      r.webgpu = { ...g, msPerLayer, gflops, msPerForward: L * msPerLayer + flopsCe / (gflops * 1e6) };
      log(`bench: WebGPU ${msPerLayer.toFixed(0)} ms per layer on ${g.adapter}`);
    }
  }
  return r;
}

const hours = (ms: number) => (ms >= 3.6e6 ? `${(ms / 3.6e6).toFixed(1)} h` : `${(ms / 6e4).toFixed(1)} min`);

/** Time of a calibration run of `clips` clips at M directions, from a forward's time. */
export function runTime(
  r: Pick<CostReport, 'totalLayers' | 'numKvHeads'>,
  msPerForward: number,
  clips: number,
  directions: number,
): number {
  return (
    clips *
    forwardsPerClip({ numLayers: r.totalLayers, numKvHeads: r.numKvHeads }, 'finite-difference', directions) *
    msPerForward
  );
}

export function formatCostReport(r: CostReport): string {
  const tf = (x: number) => `${(x / 1e12).toFixed(2)} TFLOP`;
  const lines = [
    `Calibration forward of ${r.shape} (${r.totalLayers} layers × ${r.numKvHeads} KV heads) ` +
      `over ${r.positions} rows (${r.answer} answer rows): ` +
      `${tf(r.flopsPerLayer)} per layer, ${tf(r.flopsCe)} CE, ${tf(r.flopsPerForward)} per forward.`,
    '',
    '| measured on | layers timed | ms per layer | GFLOP/s | ms per full forward | forwards per clip M=1 / 2 / 4 | 8 clips, M = 2 | 50 clips, M = 4 |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const F = [1, 2, 4]
    .map((m) => forwardsPerClip({ numLayers: r.totalLayers, numKvHeads: r.numKvHeads }, 'finite-difference', m))
    .join(' / ');
  const row = (name: string, x: { layers: number; msPerLayer: number; gflops: number; msPerForward: number }) =>
    lines.push(
      `| ${name} | ${x.layers} | ${x.msPerLayer.toFixed(0)} | ${x.gflops.toFixed(1)} | ${x.msPerForward.toFixed(0)} | ${F} | ` +
        `${hours(runTime(r, x.msPerForward, 8, 2))} | ${hours(runTime(r, x.msPerForward, 50, 4))} |`,
    );
  if (r.cpu) row('CPU reference decoder (f32, TypeScript)', r.cpu);
  if (r.webgpu) row(`WebGPU prefill, ${r.webgpu.weights} weights, ${r.webgpu.adapter}`, r.webgpu);
  lines.push(
    '',
    'Measured: the layer times (CPU: one HS forward; WebGPU: the median of the timed prefills after a warm-up). ' +
      "The rest is arithmetic: a full forward is the layers × the model's count plus the CE rows, " +
      'a clip costs forwardsPerClip forwards.',
  );
  return lines.join('\n');
}

export async function calibrationCostMain(argv: string[], log: (s: string) => void): Promise<void> {
  const o = parseCostArgs(argv);
  if (argv.includes('--modelled')) {
    const m = modelledTriage(o);
    console.log(
      o.json
        ? JSON.stringify(m, null, 1)
        : `The default triage (${m.clips} clips, ${m.forwards} forwards, ${m.tflopPerForward.toFixed(2)} TFLOP each) of ${m.shape}: ` +
            `${m.minutesAt['2'].toFixed(2)} min at 2 TFLOP/s, ${m.minutesAt['10'].toFixed(2)} min at 10 TFLOP/s.`,
    );
    return;
  }
  const r = await runCalibrationCost(o, log);
  console.log(o.json ? JSON.stringify(r, null, 1) : formatCostReport(r));
}
