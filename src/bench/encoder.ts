/**
 * `npm run bench -- --encoder whisper-large-v3-shape [--layers 1] [--weights f32|f16|q4]
 *                  [--family voxtral|qwen2_audio] [--minutes 1,10,30] [--windows N] [--backend auto|cpu] [--json]`
 *
 * Audio encoder cost at the real width (Whisper large-v3: 1280 wide, 20 heads, FFN 5120,
 * 128 mel bins, 30 s windows of 1500 positions) with K layers of random weights and the
 * family's projector: seconds per audio minute and memory at 1, 10 and 30 minutes. The
 * encoder attends within 30 s windows only, so its time is linear in the windows: by
 * default a run measures `--windows` windows (1 on the CPU, all on a hardware GPU) and
 * scales to the length; the report says which. The 32-layer figure is the K-layer one
 * scaled by 32 / K (the layers dominate; an estimate). WebGpuWhisperEncoder runs where
 * Node finds a hardware GPU (Dawn); otherwise the CPU WhisperEncoder runs and the figures
 * are labelled CPU figures (so is a software adapter such as SwiftShader, if asked for).
 */
import {
  asStored,
  encoderLinears,
  encoderWeightBytes,
  WhisperEncoder,
  type TensorLookup,
  type WhisperEncoderConfig,
  type WhisperFamilySpec,
} from '../encoder/index.js';
import type { WebGpuWhisperEncoder as WebGpuWhisperEncoderType } from '../encoder/webgpu.js';
import { randomArray, rng } from '../model/testing.js';
import { FAMILIES } from '../model/families/registry.js';
import type { WeightFormat } from '../index.js';

export const ENCODER_SHAPES: Record<string, WhisperEncoderConfig> = {
  'whisper-large-v3-shape': { nMels: 128, dModel: 1280, layers: 32, heads: 20, ffnDim: 5120, maxSourcePositions: 1500 },
};

/** The families the bench can run: encoder spec and the decoder width the released projector writes, by model_type. */
const BENCH_FAMILIES: Record<string, BenchFamily> = Object.fromEntries(
  FAMILIES.flatMap((f) =>
    f.shapes.encoderBench ? [[f.modelType, { spec: f.encoder, decoderWidth: f.shapes.encoderBench.decoderWidth }]] : [],
  ),
);

interface BenchFamily {
  spec: WhisperFamilySpec;
  decoderWidth: number;
}

export interface EncoderBenchOptions {
  shape: string;
  config: WhisperEncoderConfig;
  /** The family's model_type, for the report. */
  family: string;
  /** That family's spec and width, resolved once from `family`. */
  encoder: BenchFamily;
  layers: number;
  weights: WeightFormat;
  minutes: number[];
  /** Windows measured per length; undefined: 1 on the CPU, all on a hardware GPU. */
  windows?: number;
  json: boolean;
  /** Use a software WebGPU adapter (SwiftShader) instead of the CPU encoder when no GPU is found. */
  allowSoftware: boolean;
  /** 'cpu' skips looking for a WebGPU device. */
  backend: 'auto' | 'cpu';
  /** The projector's output width; default the family's decoder width (tests shrink it). */
  decoderWidth?: number;
}

function value(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

function positiveInt(s: string, what: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 1)
    throw new RangeError(`${what} must be a positive integer, got ${JSON.stringify(s)}`);
  return n;
}

export function parseEncoderBenchArgs(argv: string[]): EncoderBenchOptions {
  const shape = value(argv, 'encoder') ?? 'whisper-large-v3-shape';
  const base = ENCODER_SHAPES[shape];
  if (!base)
    throw new RangeError(
      `unknown encoder shape ${JSON.stringify(shape)}; known: ${Object.keys(ENCODER_SHAPES).join(', ')}`,
    );
  const family = value(argv, 'family') ?? Object.keys(BENCH_FAMILIES)[0];
  const encoder = BENCH_FAMILIES[family];
  if (!encoder)
    throw new RangeError(
      `--family must be one of ${Object.keys(BENCH_FAMILIES).join(', ')}, got ${JSON.stringify(family)}`,
    );
  const layers = positiveInt(value(argv, 'layers') ?? '1', '--layers');
  if (layers > base.layers) throw new RangeError(`--layers ${layers}: the ${shape} encoder has ${base.layers}`);
  const weights = value(argv, 'weights') ?? 'f32';
  if (weights !== 'f32' && weights !== 'f16' && weights !== 'q4')
    throw new RangeError(`--weights must be f32, f16 or q4, got ${JSON.stringify(weights)}`);
  const minutes = (value(argv, 'minutes') ?? '1,10,30').split(',').map((m) => {
    const n = Number(m);
    if (!(n > 0)) throw new RangeError(`--minutes takes positive numbers, got ${JSON.stringify(m)}`);
    return n;
  });
  const w = value(argv, 'windows');
  const backend = value(argv, 'backend') ?? 'auto';
  if (backend !== 'auto' && backend !== 'cpu')
    throw new RangeError(`--backend must be auto or cpu, got ${JSON.stringify(backend)}`);
  return {
    shape,
    config: base,
    family,
    encoder,
    layers,
    weights,
    minutes,
    windows: w === undefined ? undefined : positiveInt(w, '--windows'),
    json: argv.includes('--json'),
    allowSoftware: argv.includes('--allow-software'),
    backend,
  };
}

/** Random weights of the encoder's K first layers and the family's projector (f32, by upstream name). */
export function randomEncoderTensors(
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  decoderWidth: number,
  seed = 3,
): TensorLookup {
  const r = rng(seed);
  const { nMels, dModel: d, ffnDim: f, maxSourcePositions: P } = config;
  const t = new Map<string, Float32Array>();
  const put = (name: string, n: number, scale: number) => t.set(name, randomArray(n, scale, r));
  const p = spec.prefix;
  put(`${p}conv1.weight`, d * nMels * 3, Math.sqrt(1 / (3 * nMels)));
  put(`${p}conv1.bias`, d, 0.1);
  put(`${p}conv2.weight`, d * d * 3, Math.sqrt(1 / (3 * d)));
  put(`${p}conv2.bias`, d, 0.1);
  if (spec.positions === 'stored') put(`${p}embed_positions.weight`, P * d, 0.1);
  const ones = (name: string) => t.set(name, new Float32Array(d).fill(1));
  for (const l of encoderLinears(config, spec, () => decoderWidth)) put(l.name, l.rows * l.cols, Math.sqrt(1 / l.cols));
  for (let i = 0; i < config.layers; i++) {
    const l = `${p}layers.${i}.`;
    ones(`${l}self_attn_layer_norm.weight`);
    ones(`${l}final_layer_norm.weight`);
    for (const b of [
      'self_attn_layer_norm.bias',
      'final_layer_norm.bias',
      'self_attn.q_proj.bias',
      'self_attn.v_proj.bias',
      'self_attn.out_proj.bias',
      'fc2.bias',
    ])
      put(l + b, d, 0.02);
    put(`${l}fc1.bias`, f, 0.02);
  }
  for (const s of spec.post) {
    if (s.op === 'layernorm') {
      ones(`${s.name}.weight`);
      put(`${s.name}.bias`, d, 0.02);
    }
    if (s.op === 'linear' && s.bias) put(`${s.name}.bias`, decoderWidth, 0.02);
  }
  return { source: `random ${spec.family} encoder`, get: (n) => t.get(n) };
}

export interface EncoderBenchRow {
  minutes: number;
  windows: number;
  measuredWindows: number;
  /** Encoder seconds for the measured windows. */
  measuredSeconds: number;
  /** True when the length's time is the measured windows' scaled by windows / measuredWindows. */
  scaled: boolean;
  secondsPerAudioMinute: number;
  /** The same without the layers (convolutions, positions, projector), measured on one window. */
  fixedSecondsPerAudioMinute: number;
  /** fixed + totalLayers × (secondsPerAudioMinute − fixed) / layers: an estimate for the whole encoder. */
  fullEncoderSecondsPerAudioMinute: number;
  tokens: number;
  outputMiB: number;
  /** Of the measured run. GPU: the allocation tracker's peak during encode (weights included);
   * CPU: JS array buffers after each window (weights included). The audio embeddings the
   * transcriber keeps for the decoder are outputMiB on top. */
  peakMiB: number;
}

export interface EncoderBenchReport {
  shape: string;
  family: string;
  layers: number;
  totalLayers: number;
  weights: WeightFormat;
  device: string;
  cpuFigures: boolean;
  weightMiB: number;
  fullEncoderWeightMiB: number;
  rows: EncoderBenchRow[];
}

/**
 * One timed encode of `windows` windows of random features with the first `layers` layers
 * (0: convolutions, positions and projector only); returns seconds and the peak it saw.
 */
export type WindowRunner = (
  windows: number,
  layers: number,
) => Promise<{ seconds: number; tokens: number; peakBytes: number }>;

export async function runEncoderBench(
  o: EncoderBenchOptions,
  runner: { device: string; cpuFigures: boolean; run: WindowRunner; defaultWindows: number },
): Promise<EncoderBenchReport> {
  const { spec } = o.encoder;
  const decoderWidth = o.decoderWidth ?? o.encoder.decoderWidth;
  const windowSeconds = spec.windowFrames / 100;
  const cache = new Map<number, { seconds: number; tokens: number; peakBytes: number }>();
  const rows: EncoderBenchRow[] = [];
  let fixed: { seconds: number } | undefined;
  for (const minutes of o.minutes) {
    const windows = Math.ceil((minutes * 60) / windowSeconds);
    const measuredWindows = Math.min(windows, o.windows ?? runner.defaultWindows);
    let m = cache.get(measuredWindows);
    if (!m) {
      m = await runner.run(measuredWindows, o.layers);
      cache.set(measuredWindows, m);
    }
    fixed ??= await runner.run(1, 0);
    const perMinute = (t: { seconds: number }, w: number) => (t.seconds / w) * (60 / windowSeconds);
    const secondsPerAudioMinute = perMinute(m, measuredWindows);
    const fixedSecondsPerAudioMinute = Math.min(perMinute(fixed, 1), secondsPerAudioMinute);
    const tokens = (m.tokens / measuredWindows) * windows;
    const outputBytes = tokens * decoderWidth * 4;
    rows.push({
      minutes,
      windows,
      measuredWindows,
      measuredSeconds: m.seconds,
      scaled: measuredWindows < windows,
      secondsPerAudioMinute,
      fixedSecondsPerAudioMinute,
      fullEncoderSecondsPerAudioMinute:
        fixedSecondsPerAudioMinute +
        ((secondsPerAudioMinute - fixedSecondsPerAudioMinute) * o.config.layers) / o.layers,
      tokens,
      outputMiB: outputBytes / 2 ** 20,
      peakMiB: m.peakBytes / 2 ** 20,
    });
  }
  const mib = (layers: number) => {
    const b = encoderWeightBytes({ ...o.config, layers }, spec, decoderWidth, o.weights);
    return (b.linears + b.other) / 2 ** 20;
  };
  return {
    shape: o.shape,
    family: o.family,
    layers: o.layers,
    totalLayers: o.config.layers,
    weights: o.weights,
    device: runner.device,
    cpuFigures: runner.cpuFigures,
    weightMiB: mib(o.layers),
    fullEncoderWeightMiB: mib(o.config.layers),
    rows,
  };
}

export function formatEncoderReport(r: EncoderBenchReport): string {
  const lines = [
    `Encoder ${r.shape} (${r.family} projector), ${r.layers} of ${r.totalLayers} layers, ` +
      `random ${r.weights} weights, on ${r.device}${r.cpuFigures ? ': CPU figures' : ''}.`,
    `Weights ${r.weightMiB.toFixed(1)} MiB (${r.layers} layer${r.layers === 1 ? '' : 's'}); ` +
      `the ${r.totalLayers}-layer encoder: ${r.fullEncoderWeightMiB.toFixed(1)} MiB.`,
    `"scaled": the length's time is the measured windows' scaled to all its windows (the encoder attends within 30 s windows only).`,
    `The ${r.totalLayers}-layer column is an estimate: the time without layers (convolutions, positions, projector) ` +
      `plus ${r.totalLayers} × the measured per-layer time.`,
    '',
    `| audio | windows (measured) | s per audio min (${r.layers} layer${r.layers === 1 ? '' : 's'}) | ` +
      `of which without layers | est. s per audio min (${r.totalLayers} layers) | tokens | output MiB | peak MiB (measured run) |`,
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    lines.push(
      `| ${x.minutes} min | ${x.windows} (${x.measuredWindows}${x.scaled ? ', scaled' : ''}) | ` +
        `${x.secondsPerAudioMinute.toFixed(2)} | ${x.fixedSecondsPerAudioMinute.toFixed(2)} | ` +
        `${x.fullEncoderSecondsPerAudioMinute.toFixed(1)} | ${Math.round(x.tokens)} | ${x.outputMiB.toFixed(1)} | ${x.peakMiB.toFixed(1)} |`,
    );
  }
  return lines.join('\n');
}

/** Random features of `windows` whole windows. */
function features(config: WhisperEncoderConfig, spec: WhisperFamilySpec, windows: number) {
  const frames = windows * spec.windowFrames;
  return { data: randomArray(config.nMels * frames, 1, rng(17)), nMels: config.nMels, frames, validFrames: frames };
}

/** The runner: WebGPU when Node finds a hardware GPU (or a software one when allowed), else the CPU reference. */
export async function pickRunner(
  o: EncoderBenchOptions,
  log: (s: string) => void,
): Promise<{ device: string; cpuFigures: boolean; run: WindowRunner; defaultWindows: number; dispose(): void }> {
  const { spec } = o.encoder;
  const decoderWidth = o.decoderWidth ?? o.encoder.decoderWidth;
  const full = { ...o.config, layers: o.layers };
  const tensors = randomEncoderTensors(full, spec, decoderWidth);
  // `layers` < K: the same tensors, the first `layers` layers read (0: no layers).
  const configFor = (layers: number) => ({ ...full, layers });
  try {
    if (o.backend === 'cpu') throw new Error('--backend cpu');
    const { GpuContext } = await import('../gpu/device.js');
    const { PipelineCache } = await import('../gpu/pipelines.js');
    const { WebGpuWhisperEncoder } = await import('../encoder/webgpu.js');
    const ctx = await GpuContext.acquire();
    if (ctx.info.software && !o.allowSoftware) {
      log(`bench: ${ctx.info.label}; using the CPU encoder (--allow-software runs WebGPU there)`);
      ctx.device.destroy();
    } else {
      const cache = new PipelineCache(ctx);
      const encoders = new Map<number, WebGpuWhisperEncoderType>();
      const run: WindowRunner = async (windows, layers) => {
        let enc = encoders.get(layers);
        if (!enc) {
          enc = await WebGpuWhisperEncoder.create(ctx, cache, configFor(layers), spec, tensors, {
            weightFormat: o.weights,
          });
          encoders.set(layers, enc);
          await enc.encode(features(full, spec, 1)); // compile and warm up
        }
        const mel = features(full, spec, windows);
        ctx.resetPeak();
        const t0 = performance.now();
        const out = await enc.encode(mel);
        return { seconds: (performance.now() - t0) / 1000, tokens: out.tokens, peakBytes: ctx.peakBytes };
      };
      const dispose = () => {
        for (const e of encoders.values()) e.destroy();
        ctx.device.destroy();
      };
      return {
        device: ctx.info.label,
        cpuFigures: ctx.info.software,
        run,
        defaultWindows: ctx.info.software ? 1 : Infinity,
        dispose,
      };
    }
  } catch (e) {
    if (o.backend !== 'cpu')
      log(
        `bench: no WebGPU device in Node (${e instanceof Error ? e.message.split('\n')[0] : String(e)}); using the CPU encoder`,
      );
  }
  const stored = o.weights === 'f32' ? tensors : asStored(tensors, full, spec, o.weights);
  const run: WindowRunner = async (windows, layers) => {
    const enc = new WhisperEncoder(configFor(layers), spec, stored);
    let seconds = 0;
    let tokens = 0;
    let peak = 0;
    // One window per call, as the transcriber's CPU route encodes 30 s examples.
    for (let w = 0; w < windows; w++) {
      const mel = features(full, spec, 1);
      const t0 = performance.now();
      tokens += enc.encode(mel).tokens;
      seconds += (performance.now() - t0) / 1000;
      peak = Math.max(peak, process.memoryUsage().arrayBuffers);
    }
    return { seconds, tokens, peakBytes: peak };
  };
  return {
    device: `the CPU reference encoder (TypeScript, f32 maths on ${o.weights} values)`,
    cpuFigures: true,
    run,
    defaultWindows: 1,
    dispose: () => {},
  };
}

export async function encoderBenchMain(argv: string[], log: (s: string) => void): Promise<void> {
  const o = parseEncoderBenchArgs(argv);
  const runner = await pickRunner(o, log);
  try {
    const report = await runEncoderBench(o, runner);
    console.log(o.json ? JSON.stringify(report, null, 1) : formatEncoderReport(report));
  } finally {
    runner.dispose();
  }
}
