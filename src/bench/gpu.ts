/**
 * `npm run bench:gpu [-- --bandwidth GB/s] [--out bench-gpu.json] [--steps 16] [--reference-minutes 1,10]
 *                   [--shape-minutes 1,10,30] [--software-max-minutes 1] [--software-shape-minutes 0.25] [--no-pipeline]`
 *
 * One command that times decode on whatever adapter is present (./gpu-run.ts says what):
 * a hardware GPU in Node (Dawn), else WebGPU in headless Chromium, where a software adapter
 * (SwiftShader) is labelled so (`cpuFigures: true`) and runs only lengths up to
 * --software-max-minutes (reference model) and --software-shape-minutes (the backbone's
 * shape); the longer ones are listed as not run. Writes one JSON and prints
 * a table. WebGPU reports no memory bandwidth: give it (--bandwidth, GB/s) for the floor.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { existsSync, writeFileSync } from 'node:fs';
import { loadModel } from '../model/loader.js';
import { randomDecoderWeights, referenceConfig } from '../model/testing.js';
import { syntheticHeads } from './decode.js';
import { runGpuBench, type GpuBenchReport, type GpuBenchRequest } from './gpu-run.js';
import { onHarnessPage } from './webgpu.js';
import { formatHostRows } from './host-main.js';

function value(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const minutesOf = (s: string) =>
  s
    .split(',')
    .map(Number)
    .filter((m) => m > 0);

async function main(): Promise<void> {
  const log = (s: string) => process.stderr.write(s + '\n');
  const bw = value('bandwidth');
  const req: GpuBenchRequest = {
    referenceMinutes: minutesOf(value('reference-minutes') ?? '1,10'),
    shapeMinutes: minutesOf(value('shape-minutes') ?? '1,10,30'),
    steps: Number(value('steps') ?? '16'),
    bandwidthGBs: bw === undefined ? null : Number(bw),
    softwareMaxMinutes: {
      reference: Number(value('software-max-minutes') ?? '1'),
      shape: Number(value('software-shape-minutes') ?? '0.25'),
    },
    pipeline: !process.argv.includes('--no-pipeline'),
  };
  if (!(req.steps >= 6) || (req.bandwidthGBs !== null && !(req.bandwidthGBs > 0)))
    throw new RangeError('--steps takes an integer >= 6 and --bandwidth a positive number of GB/s');
  const out = value('out') ?? 'bench-gpu.json';
  const modelDir = value('model') ?? 'public/models/wnw-ref';
  const hasModel = existsSync(`${modelDir}/decoder.safetensors`);
  let report: GpuBenchReport | null = await nodeHardware(req, modelDir, hasModel, log);
  if (!report) {
    const model = hasModel ? '/' + modelDir.replace(/^public\//, '') : null;
    report = await onHarnessPage(log, (page) =>
      page.evaluate((r) => (window as unknown as { wnwBenchGpu(r: unknown): Promise<GpuBenchReport> }).wnwBenchGpu(r), {
        req,
        model,
      }),
    );
    if (report) report = { ...report, adapter: `${report.adapter} in headless Chromium` };
  }
  if (!report) throw new Error('bench:gpu: no WebGPU adapter in Node and no Chromium (set WNW_CHROMIUM)');
  writeFileSync(out, JSON.stringify(report, null, 1) + '\n');
  console.log(formatGpuReport(report));
  log(`bench:gpu: ${out} written in ${report.seconds.toFixed(0)} s`);
}

/** The whole run in Node where Dawn finds a hardware adapter; null where it does not. */
async function nodeHardware(
  req: GpuBenchRequest,
  modelDir: string,
  hasModel: boolean,
  log: (s: string) => void,
): Promise<GpuBenchReport | null> {
  const { createWebGpuBackend } = await import('../backend/webgpu/index.js');
  const m = hasModel ? await loadModel(modelDir) : null;
  const config = m?.config ?? referenceConfig();
  const weights = m?.weights ?? randomDecoderWeights(config, 1);
  try {
    (await createWebGpuBackend(config, weights, { allowSoftware: false })).dispose();
  } catch (e) {
    log(
      `bench:gpu: no hardware GPU for Node (${e instanceof Error ? e.message.split('\n')[0] : String(e)}); trying headless Chromium`,
    );
    return null;
  }
  const reference = {
    config,
    weights,
    heads: m?.heads ?? syntheticHeads(config, 750),
    label: hasModel ? `${config.name} (trained)` : `${config.name} (random weights)`,
  };
  return runGpuBench(req, (c, w) => createWebGpuBackend(c, w, { allowSoftware: false }), reference, log);
}

export function formatGpuReport(r: GpuBenchReport): string {
  const lines = [
    `Adapter: ${r.adapter}${r.cpuFigures ? ' — CPU FIGURES (software adapter): compare ratios only, these are not GPU timings' : ''}.`,
    `Decode ms/token: median of ${r.steps} steps; ` +
      `${r.pipeline ? 'pipelined where the policy allows' : 'waiting loop (--no-pipeline)'}. ` +
      `${r.shape}: ${r.layerWeightMB.toFixed(1)} MB of q4 weights a layer, ` +
      `${r.fullModelWeightMBPerStep.toFixed(0)} MB a step for all ${r.totalLayers} layers.`,
    '',
    '| model | K | audio | policy | loop | ms/token | vs full | CPU waits/step | readback B/step | CPU→GPU B/step | submits/step |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...r.rows.map(
      (x) =>
        `| ${x.model} | ${x.layers} | ${x.minutes} min | ` +
        `${x.policy}${x.policy === 'full' ? '' : ` @${x.budget}`}${x.variant ? ` ${x.variant}` : ''} | ` +
        `${x.pipelined ? 'pipelined' : 'waiting'} | ${x.msPerToken.toFixed(2)} | ${x.msPerTokenVsFull.toFixed(3)} | ` +
        `${x.cpuWaitsPerStep.toFixed(2)} | ${x.readbackBytesPerStep.toFixed(0)} | ${x.bytesToGpuPerStep.toFixed(0)} | ` +
        `${x.submitsPerStep.toFixed(2)} |`,
    ),
    '',
    '| audio | policy | ms per layer (K=2 − K=1) | whole decoder ms/token (extrapolated) | layer floor ms | whole decoder floor ms |',
    '|---|---|---|---|---|---|',
    ...r.layerCosts.map(
      (x) =>
        `| ${x.minutes} min | ${x.policy} | ${x.marginalMsPerLayer.toFixed(3)} | ${x.fullModelMsPerToken.toFixed(2)} | ` +
        `${x.layerFloorMs?.toFixed(3) ?? 'bandwidth not given'} | ${x.fullModelFloorMs?.toFixed(3) ?? 'bandwidth not given'} |`,
    ),
  ];
  if (r.host.length) lines.push('', 'Host time per step (ms), all layers:', '', formatHostRows(r.host));
  if (r.triage)
    lines.push(
      '',
      `Head triage of one 30 s clip: ${r.triage.msAtLayers.map((m) => m.toFixed(0)).join(' / ')} ms at K = 1 / 2 layers, ` +
        `${(r.triage.fullModelMsPerClip / 1000).toFixed(2)} s at all ${r.totalLayers} (${r.triage.tflops.toFixed(2)} TFLOP/s): ` +
        `the default triage in ${r.triage.defaultMinutes.toFixed(2)} min (modelled at 2 TFLOP/s: npm run bench -- --calibration-cost --modelled).`,
    );
  if (r.skipped.length) lines.push('', `Not run: ${r.skipped.join('; ')}.`);
  return lines.join('\n');
}

main().catch((e) => {
  console.error(`bench:gpu: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  process.exit(1);
});
