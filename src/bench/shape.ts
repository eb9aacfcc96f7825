/**
 * `npm run bench -- --shape voxtral-mini-3b [--layers 1] [--weights q4|f16|f32] [--minutes 1,10,30]
 *                  [--steps 16] [--backend auto|cpu|webgpu] [--kv f32|f16] [--bandwidth GB/s] [--json]`
 *
 * Decode at a real backbone's per-layer shapes: K layers of random weights (packed tensor by
 * tensor, so the 131,072 × 3,072 embedding and lm_head never exist in f32 at once), the real
 * vocabulary and KV layout, random audio embeddings. Per length: decode ms/token of the
 * full cache and of WnW at r_GPU 0.2 measured in one run (their ratio is the figure to
 * compare), weight and KV bytes read per step, dispatches and submits per step, and the
 * roofline floor (bytes per step / bandwidth) where the bandwidth is given. A software
 * adapter's or the CPU backend's figures are labelled CPU figures.
 */
import { createBackend } from '../backend/create.js';
import { parseKvPrecision } from '../cli/args.js';
import type { ModelConfig } from '../model/config.js';
import { isWeightFormat, packedWeightBytes } from '../model/packed-weights.js';
import { randomEmbeddings } from '../model/testing.js';
import { DECODER_SHAPES, randomPackedWeights, shapeConfig } from './shapes.js';

export { DECODER_SHAPES, randomPackedWeights, shapeConfig };
import { syntheticHeads, timeFullAndWnw, type PolicyTiming } from './decode.js';
import type { KvPrecision, WeightFormat } from '../index.js';

export interface ShapeBenchOptions {
  shape: string;
  layers: number;
  weights: WeightFormat;
  minutes: number[];
  steps: number;
  backend: 'auto' | 'cpu' | 'webgpu';
  /** Device memory bandwidth in GB/s, for the roofline floor; undefined: not known. */
  bandwidth?: number;
  kv: KvPrecision;
  json: boolean;
}

function value(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

export function parseShapeBenchArgs(argv: string[]): ShapeBenchOptions {
  const shape = value(argv, 'shape') ?? Object.keys(DECODER_SHAPES)[0];
  const s = DECODER_SHAPES[shape];
  if (!s)
    throw new RangeError(
      `unknown decoder shape ${JSON.stringify(shape)}; known: ${Object.keys(DECODER_SHAPES).join(', ')}`,
    );
  const layers = Number(value(argv, 'layers') ?? '1');
  if (!Number.isInteger(layers) || layers < 1 || layers > s.totalLayers)
    throw new RangeError(`--layers must be 1..${s.totalLayers}, got ${value(argv, 'layers')}`);
  const weights = value(argv, 'weights') ?? 'q4';
  if (!isWeightFormat(weights))
    throw new RangeError(`--weights must be f32, f16 or q4, got ${JSON.stringify(weights)}`);
  const minutes = (value(argv, 'minutes') ?? '1,10,30').split(',').map(Number);
  if (!minutes.every((m) => m > 0))
    throw new RangeError(`--minutes takes positive numbers, got ${value(argv, 'minutes')}`);
  const steps = Number(value(argv, 'steps') ?? '16');
  if (!Number.isInteger(steps) || steps < 2)
    throw new RangeError(`--steps must be an integer ≥ 2, got ${value(argv, 'steps')}`);
  const backend = value(argv, 'backend') ?? 'auto';
  if (backend !== 'auto' && backend !== 'cpu' && backend !== 'webgpu')
    throw new RangeError(`--backend must be auto, cpu or webgpu, got ${JSON.stringify(backend)}`);
  const bw = value(argv, 'bandwidth');
  const bandwidth = bw === undefined ? undefined : Number(bw);
  if (bandwidth !== undefined && !(bandwidth > 0))
    throw new RangeError(`--bandwidth takes GB/s, got ${JSON.stringify(bw)}`);
  return {
    shape,
    layers,
    weights,
    minutes,
    steps,
    backend,
    bandwidth,
    kv: parseKvPrecision(value(argv, 'kv') ?? 'f32'),
    json: argv.includes('--json'),
  };
}

export interface ShapeBenchRow extends PolicyTiming {
  minutes: number;
  audioTokens: number;
  msPerTokenVsFull: number;
  /** Decoder weight bytes one step reads (layers, final norm, lm_head; one embedding row). */
  weightMBPerStep: number;
  /** KV bytes resident on the device at the end of the steps (what attention reads per step). */
  kvMBPerStep: number;
  /** (weight + KV bytes per step) / bandwidth, in ms; null when the bandwidth is not known. */
  floorMs: number | null;
}

export interface ShapeBenchReport {
  shape: string;
  layers: number;
  totalLayers: number;
  weights: WeightFormat;
  kv: KvPrecision;
  backend: string;
  cpuFigures: boolean;
  weightMiB: number;
  rows: ShapeBenchRow[];
}

export async function runShapeBench(
  o: ShapeBenchOptions,
  log: (s: string) => void,
  cfgOverride?: ModelConfig,
): Promise<ShapeBenchReport> {
  const c = cfgOverride ?? shapeConfig(o.shape, o.layers);
  const weights = randomPackedWeights(c, o.weights);
  const bytes = packedWeightBytes(weights);
  const weightBytesPerStep = bytes.total - bytes.embed + c.hiddenSize * 4;
  const heads = syntheticHeads(c, 375);
  const backend = await createBackend(c, weights, {
    backend: o.backend,
    weightFormat: o.weights,
    kvPrecision: o.kv,
    onFallback: (why) => log(`bench: CPU backend (${why.split('\n')[0]})`),
  });
  const label = backend.label;
  const cpuFigures = backend.kind !== 'webgpu' || /swiftshader|software|cpu rasteriser/i.test(label);
  const rows: ShapeBenchRow[] = [];
  try {
    for (const minutes of o.minutes) {
      const N = Math.round(minutes * 60 * c.audio.tokensPerSecond);
      const emb = randomEmbeddings(c, N, 5);
      const [full, wnw] = await timeFullAndWnw(backend, c, emb, N, heads, o.steps);
      log(
        `bench: ${minutes} min: full ${full.msPerToken.toFixed(1)} ms/token, wnw@0.2 ${wnw.msPerToken.toFixed(1)} ms/token`,
      );
      for (const t of [full, wnw]) {
        const kv = t.gpuKvMiB * 2 ** 20;
        rows.push({
          ...t,
          minutes,
          audioTokens: N,
          msPerTokenVsFull: t.msPerToken / full.msPerToken,
          weightMBPerStep: weightBytesPerStep / 1e6,
          kvMBPerStep: kv / 1e6,
          floorMs: o.bandwidth ? ((weightBytesPerStep + kv) / (o.bandwidth * 1e9)) * 1000 : null,
        });
      }
    }
  } finally {
    backend.dispose();
  }
  return {
    shape: o.shape,
    layers: c.numLayers,
    totalLayers: DECODER_SHAPES[o.shape]?.totalLayers ?? c.numLayers,
    weights: o.weights,
    kv: o.kv,
    backend: label,
    cpuFigures,
    weightMiB: bytes.total / 2 ** 20,
    rows,
  };
}

export function formatShapeReport(r: ShapeBenchReport): string {
  const lines = [
    `Decoder ${r.shape}, ${r.layers} of ${r.totalLayers} layers, ` +
      `random ${r.weights} weights (${r.weightMiB.toFixed(0)} MiB with embedding and lm_head), ` +
      `${r.kv} KV, on ${r.backend}${r.cpuFigures ? ': CPU figures' : ''}.`,
    'Full cache and WnW @0.2 measured in one run; compare the "vs full" ratio. ' +
      'KV MB is what is resident on the device at the end (what attention reads per step).',
    '',
    '| audio | tokens | policy | decode ms/token | vs full | weight MB/step | KV MB/step | floor ms | dispatches/step | submits/step |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    lines.push(
      `| ${x.minutes} min | ${x.audioTokens} | ${x.policy}${x.policy === 'full' ? '' : ` @${x.budget}`} | ` +
        `${x.msPerToken.toFixed(2)} | ${x.msPerTokenVsFull.toFixed(3)} | ${x.weightMBPerStep.toFixed(1)} | ` +
        `${x.kvMBPerStep.toFixed(1)} | ${x.floorMs === null ? 'bandwidth unknown' : x.floorMs.toFixed(3)} | ` +
        `${x.dispatchesPerStep} | ${x.submitsPerStep} |`,
    );
  }
  return lines.join('\n');
}

export async function shapeBenchMain(argv: string[], log: (s: string) => void): Promise<void> {
  const o = parseShapeBenchArgs(argv);
  const r = await runShapeBench(o, log);
  console.log(o.json ? JSON.stringify(r, null, 1) : formatShapeReport(r));
}
