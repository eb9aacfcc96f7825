/**
 * The timing `npm run bench:gpu` asks of whatever adapter is present (./gpu.ts runs it in
 * Node on a hardware GPU, or in headless Chromium): the reference model, and Voxtral-Mini-3B's
 * decoder shape at K = 1 and 2 layers of random q4 weights, full cache against WnW at 0.2
 * (and WnW with its plans two steps late, which the loop pipelines), per recording length.
 * From the two Ks: the marginal cost of a layer, t(K=2) − t(K=1), the 30-layer model's
 * ms/token it implies, and the weight-bandwidth floor (bytes a step reads / bandwidth); on
 * a hardware adapter also the page's host time per step at all 30 layers (./host.ts) and the
 * head triage of one clip (the backend's `triage`), against its modelled cost.
 * Browser-safe: no Node imports.
 */
import type { DecoderBackend } from '../backend/types.js';
import { promptLength, type ModelConfig } from '../model/config.js';
import { DEFAULT_TRIAGE_CLIPS, triageFlops } from '../calibrate/cost.js';
import type { DecoderWeights } from '../model/weights.js';
import type { PackedDecoderWeights } from '../model/packed-weights.js';
import { packedWeightBytes } from '../model/packed-weights.js';
import { randomEmbeddings } from '../model/testing.js';
import { syntheticHeads, timeFullAndWnw, type PolicyTiming } from './decode.js';
import { DECODER_SHAPES, randomPackedWeights, shapeConfig } from './shapes.js';
import type { HeadsFile } from '../model/heads.js';
import type { WebGpuBackend } from '../backend/webgpu/backend.js';
import { hostRunOf, hostTimes, type HostRow } from './host.js';

export const GPU_BENCH_SHAPE = 'voxtral-mini-3b';

export interface GpuBenchRequest {
  /** Lengths in minutes: the reference model's and the backbone shape's. */
  referenceMinutes: number[];
  shapeMinutes: number[];
  steps: number;
  /** Device bandwidth in GB/s for the floor (WebGPU reports none); null: not given. */
  bandwidthGBs: number | null;
  /**
   * On a software adapter, lengths above these are not run (they would take hours on the
   * CPU): the reference model's, and the backbone shape's (a step of its 131,072-entry q4
   * lm_head alone takes seconds there).
   */
  softwareMaxMinutes: { reference: number; shape: number };
  pipeline: boolean;
}

export interface GpuBenchRow extends PolicyTiming {
  model: string;
  layers: number;
  minutes: number;
  audioTokens: number;
  msPerTokenVsFull: number;
}

export interface LayerCost {
  minutes: number;
  policy: string;
  /** t(K=2) − t(K=1), ms/token: what one more decoder layer costs. */
  marginalMsPerLayer: number;
  /** t(K=1) + (layers − 1) · marginal: the whole decoder's ms/token, extrapolated. */
  fullModelMsPerToken: number;
  /** Weight bytes of one layer / bandwidth, ms; null without a bandwidth. */
  layerFloorMs: number | null;
  /** The whole decoder's weight bytes per step (layers, norm, lm_head, one embedding row) / bandwidth, ms. */
  fullModelFloorMs: number | null;
}

export interface GpuBenchReport {
  adapter: string;
  /** True on SwiftShader and the like: every figure is a CPU figure, only ratios mean anything. */
  cpuFigures: boolean;
  bandwidthGBs: number | null;
  steps: number;
  pipeline: boolean;
  shape: string;
  totalLayers: number;
  /** q4 bytes of one layer, and of the whole decoder a step reads. */
  layerWeightMB: number;
  fullModelWeightMBPerStep: number;
  /** Lengths asked for but not run (software adapter), with why. */
  skipped: string[];
  rows: GpuBenchRow[];
  layerCosts: LayerCost[];
  /** The page's own time per step at all the shape's layers (./host.ts), beside the GPU's; empty on a software adapter. */
  host: HostRow[];
  /** The head triage of one 30 s clip (375 audio tokens, 100 answer tokens) at K = 1 and 2 layers, and extrapolated; null on a software adapter. */
  triage: TriageTiming | null;
  seconds: number;
}

export interface TriageTiming {
  /** Median ms of one clip's triage at K = 1 and K = 2 layers. */
  msAtLayers: [number, number];
  /** K = 1 plus (layers − 1) times the marginal layer: one clip at the whole model's layers. */
  fullModelMsPerClip: number;
  /** The whole model's triage FLOPs a clip over that time. */
  tflops: number;
  /** The default triage (DEFAULT_TRIAGE_CLIPS clips) at that rate, in minutes. */
  defaultMinutes: number;
}

/** Times `Transcriber.calibrate`'s per-clip work (the backend's triage) at the shape's widths, K = 1 and 2 layers. */
async function timeTriage(make: MakeBackend, log: (s: string) => void): Promise<TriageTiming> {
  const shape = DECODER_SHAPES[GPU_BENCH_SHAPE];
  const N = 375;
  const T = 101;
  const ms: number[] = [];
  for (const K of [1, 2]) {
    const c = shapeConfig(GPU_BENCH_SHAPE, K);
    const b = await make(c, randomPackedWeights(c, 'q4'));
    try {
      const audio = randomEmbeddings(c, N, 9);
      const answer = [...Array.from({ length: T - 1 }, (_, i) => 10 + i), c.stopTokens[0]];
      const times: number[] = [];
      for (let rep = 0; rep < 3; rep++) {
        const t0 = performance.now();
        await b.triage(audio, N, answer);
        if (rep > 0) times.push(performance.now() - t0);
      }
      ms.push(times.sort((x, y) => x - y)[Math.floor(times.length / 2)]);
      log(`bench:gpu triage K=${K}: ${ms.at(-1)!.toFixed(0)} ms a clip`);
    } finally {
      b.dispose();
    }
  }
  const full = ms[0] + (shape.totalLayers - 1) * (ms[1] - ms[0]);
  const c = shapeConfig(GPU_BENCH_SHAPE, shape.totalLayers);
  const flops = triageFlops(c, promptLength(c, N) + T - 1, T, N);
  return {
    msAtLayers: [ms[0], ms[1]],
    fullModelMsPerClip: full,
    tflops: flops / (full / 1000) / 1e12,
    defaultMinutes: (DEFAULT_TRIAGE_CLIPS * full) / 60_000,
  };
}

/** Makes a backend on the adapter at hand for a config and its weights. */
export type MakeBackend = (
  c: ModelConfig,
  w: DecoderWeights | PackedDecoderWeights,
) => Promise<DecoderBackend & { ctx?: { info: { software: boolean } } }>;

const policyKey = (t: PolicyTiming) =>
  `${t.policy}${t.policy === 'full' ? '' : `@${t.budget}`}${t.variant ? `:${t.variant}` : ''}`;

/** Times every length on `backend`, then disposes of it. */
async function timeModel(
  backend: Awaited<ReturnType<MakeBackend>>,
  c: ModelConfig,
  heads: HeadsFile,
  minutes: number[],
  req: GpuBenchRequest,
  model: string,
  log: (s: string) => void,
): Promise<GpuBenchRow[]> {
  const rows: GpuBenchRow[] = [];
  try {
    for (const m of minutes) {
      const N = Math.round(m * 60 * c.audio.tokensPerSecond);
      const ts = await timeFullAndWnw(backend, c, randomEmbeddings(c, N, 5), N, heads, req.steps, {
        pipeline: req.pipeline,
        withPaperLag: req.pipeline,
      });
      log(
        `bench:gpu ${model} K=${c.numLayers} ${m} min: ${ts.map((t) => `${policyKey(t)} ${t.msPerToken.toFixed(2)}`).join(', ')} ms/token`,
      );
      for (const t of ts)
        rows.push({
          ...t,
          model,
          layers: c.numLayers,
          minutes: m,
          audioTokens: N,
          msPerTokenVsFull: t.msPerToken / ts[0].msPerToken,
        });
    }
  } finally {
    backend.dispose();
  }
  return rows;
}

export async function runGpuBench(
  req: GpuBenchRequest,
  make: MakeBackend,
  reference: { config: ModelConfig; weights: DecoderWeights; heads: HeadsFile; label: string },
  log: (s: string) => void,
): Promise<GpuBenchReport> {
  const t0 = performance.now();
  const skipped: string[] = [];
  const refBackend = await make(reference.config, reference.weights);
  // The adapter is known once a backend exists: a software one runs only the short lengths.
  const software = refBackend.ctx?.info.software ?? refBackend.kind !== 'webgpu';
  const adapter = refBackend.label;
  const cap = (ms: number[], what: string, max: number, flag: string) => {
    if (!software) return ms;
    for (const m of ms.filter((x) => x > max)) skipped.push(`${what} at ${m} min: software adapter (${flag} ${max})`);
    return ms.filter((x) => x <= max);
  };
  const rows: GpuBenchRow[] = [];
  rows.push(
    ...(await timeModel(
      refBackend,
      reference.config,
      reference.heads,
      cap(req.referenceMinutes, reference.label, req.softwareMaxMinutes.reference, '--software-max-minutes'),
      req,
      reference.label,
      log,
    )),
  );
  const shape = DECODER_SHAPES[GPU_BENCH_SHAPE];
  const bytes: number[] = [];
  for (const K of [1, 2]) {
    const c = shapeConfig(GPU_BENCH_SHAPE, K);
    const w = randomPackedWeights(c, 'q4');
    const b = packedWeightBytes(w);
    bytes.push(b.total - b.embed + c.hiddenSize * 4);
    const lengths = cap(
      req.shapeMinutes,
      `${GPU_BENCH_SHAPE} K=${K}`,
      req.softwareMaxMinutes.shape,
      '--software-shape-minutes',
    );
    if (lengths.length)
      rows.push(...(await timeModel(await make(c, w), c, syntheticHeads(c, 375), lengths, req, GPU_BENCH_SHAPE, log)));
  }
  const layerBytes = bytes[1] - bytes[0];
  const fullBytes = bytes[0] + (shape.totalLayers - 1) * layerBytes;
  const floor = (b: number) => (req.bandwidthGBs ? (b / (req.bandwidthGBs * 1e9)) * 1000 : null);
  const layerCosts: LayerCost[] = [];
  for (const r1 of rows.filter((r) => r.model === GPU_BENCH_SHAPE && r.layers === 1)) {
    const r2 = rows.find(
      (r) =>
        r.model === GPU_BENCH_SHAPE && r.layers === 2 && r.minutes === r1.minutes && policyKey(r) === policyKey(r1),
    );
    if (!r2) continue;
    const marginal = r2.msPerToken - r1.msPerToken;
    layerCosts.push({
      minutes: r1.minutes,
      policy: policyKey(r1),
      marginalMsPerLayer: marginal,
      fullModelMsPerToken: r1.msPerToken + (shape.totalLayers - 1) * marginal,
      layerFloorMs: floor(layerBytes),
      fullModelFloorMs: floor(fullBytes),
    });
  }
  let triage: TriageTiming | null = null;
  if (software)
    skipped.push('the head triage at the shape: software adapter (npm run bench -- --calibration-cost --modelled)');
  else triage = await timeTriage(make, log);
  const host: HostRow[] = [];
  if (software)
    skipped.push(`host time per step at all ${shape.totalLayers} layers: software adapter (npm run bench -- --host)`);
  else {
    const { run, weights } = hostRunOf({
      shape: GPU_BENCH_SHAPE,
      layers: shape.totalLayers,
      minutes: req.shapeMinutes,
      steps: req.steps,
      kv: 'f32',
      bandwidthGBs: req.bandwidthGBs ?? 300,
    });
    const b = await make(run.config, weights);
    try {
      if ('openUnfilled' in b) host.push(...(await hostTimes(b as WebGpuBackend, run, log)));
    } finally {
      b.dispose();
    }
  }
  return {
    adapter,
    cpuFigures: software,
    bandwidthGBs: req.bandwidthGBs,
    steps: req.steps,
    pipeline: req.pipeline,
    shape: GPU_BENCH_SHAPE,
    totalLayers: shape.totalLayers,
    layerWeightMB: layerBytes / 1e6,
    fullModelWeightMBPerStep: fullBytes / 1e6,
    skipped,
    rows,
    layerCosts,
    host,
    triage,
    seconds: (performance.now() - t0) / 1000,
  };
}
