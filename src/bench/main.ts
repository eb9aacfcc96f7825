/**
 * `npm run bench [-- --json] [--minutes 1,4,10] [--steps 32] [--backends cpu,webgpu] [--kv f32|f16] [--software-max-minutes 1] [--no-pipeline]`
 * `npm run bench -- --encoder whisper-large-v3-shape [--layers 1] [--weights f32|f16|q4]`: the audio encoder (./encoder.ts).
 * `npm run bench -- --shape voxtral-mini-3b [--layers 1] [--weights q4]`: decode at a real backbone's shapes (./shape.ts).
 * `npm run bench -- --host [--shape voxtral-mini-3b] [--minutes 30] [--stand-in]`: the page's own time per decode step (./host-main.ts).
 * `npm run bench -- --memory [--weights q4] [--kv f16]`: GPU memory of the released backbones per recording length (./memory.ts).
 * `npm run bench -- --calibration-cost [--layers 1]`: a calibration forward at a real backbone's shapes, and the run's time (./calibration-cost.ts).
 * `npm run bench -- --cpu-load MODEL_DIR [--seconds 5] [--tokens 4] [--host-memory BYTES]`: host memory and time of a CPU load and decode (./cpu-load.ts).
 * `npm run bench -- --session`: one recording, many requests: time to a second request's first token, a recording's CPU memory (./session.ts).
 * `npm run bench -- --page-memory --model DIR [--cache]`: a folder loaded in headless Chromium on WebGPU, the renderer's and GPU process's resident memory (./page-memory.ts).
 *
 * Prefill tokens/s and decode ms/token of the reference model at 1, 4 and 10 minutes of
 * audio, full cache vs WnW at r_GPU 0.2, for every backend this machine reaches. Numbers
 * are measured in one run; compare ratios. WebGPU on SwiftShader runs on the CPU: its
 * rows are labelled so and are not GPU timings.
 *
 * The decode loop queues step t + 1 before it reads step t where the policy's plans may
 * apply two steps late (the full cache; WnW where its budget holds the lead, planLag auto);
 * WnW with the paper's one-step lag (planLag=1, a third row) waits for each step. `--no-pipeline` runs every policy in the waiting loop
 * (the loop before the pipeline), for the side-by-side comparison.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { parseKvPrecision } from '../cli/args.js';
import { existsSync } from 'node:fs';
import { createBackend } from '../backend/create.js';
import { loadModel } from '../model/loader.js';
import type { ModelConfig } from '../model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../model/testing.js';
import type { DecoderWeights } from '../model/weights.js';
import { syntheticHeads, timeFullAndWnw, type PolicyTiming } from './decode.js';
import { benchWebGpu } from './webgpu.js';
import { encoderBenchMain } from './encoder.js';
import { shapeBenchMain } from './shape.js';
import { runMemory } from './memory.js';
import type { HeadsFile } from '../model/heads.js';

interface Row extends PolicyTiming {
  backend: string;
  minutes: number;
  audioTokens: number;
  msPerTokenVsFull: number;
}

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

async function main(): Promise<void> {
  if (process.argv.includes('--encoder')) return encoderBenchMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--memory')) return runMemory(process.argv);
  if (process.argv.includes('--calibration-cost'))
    return (await import('./calibration-cost.js')).calibrationCostMain(process.argv, (s) =>
      process.stderr.write(s + '\n'),
    );
  if (process.argv.includes('--triage-host-memory'))
    return (await import('./triage-host.js')).triageHostMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--cpu-load'))
    return (await import('./cpu-load.js')).cpuLoadBenchMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--session'))
    return (await import('./session.js')).sessionBenchMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--page-memory'))
    return (await import('./page-memory.js')).pageMemoryMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--host'))
    return (await import('./host-main.js')).hostBenchMain(process.argv, (s) => process.stderr.write(s + '\n'));
  if (process.argv.includes('--shape')) return shapeBenchMain(process.argv, (s) => process.stderr.write(s + '\n'));
  const json = process.argv.includes('--json');
  const minutes = arg('minutes', '1,4,10').split(',').map(Number);
  const steps = Number(arg('steps', '32'));
  const backends = arg('backends', 'cpu,webgpu').split(',');
  const modelDir = arg('model', 'public/models/wnw-ref');
  const kv = parseKvPrecision(arg('kv', 'f32'));
  const pipeline = !process.argv.includes('--no-pipeline');
  const timing = { pipeline, withPaperLag: pipeline };
  let config: ModelConfig;
  let weights: DecoderWeights;
  let heads: HeadsFile | undefined;
  let modelLabel: string;
  if (existsSync(`${modelDir}/decoder.safetensors`)) {
    const m = await loadModel(modelDir);
    config = m.config;
    weights = m.weights;
    heads = m.heads;
    modelLabel = `${config.name} (trained weights)`;
  } else {
    config = referenceConfig();
    weights = randomDecoderWeights(config, 1);
    modelLabel = `${config.name} (random weights with the reference shapes: ${modelDir} has no decoder.safetensors)`;
  }
  if (!heads) heads = syntheticHeads(config, 750);
  const rows: Row[] = [];
  const log = (s: string) => process.stderr.write(s + '\n');
  for (const m of minutes) {
    const N = Math.round(m * 60 * config.audio.tokensPerSecond);
    const emb = randomEmbeddings(config, N, 5);
    if (backends.includes('cpu')) {
      const be = await createBackend(config, weights, { kvPrecision: kv }, { kind: 'cpu' });
      const ts = await timeFullAndWnw(be, config, emb, N, heads, steps, timing);
      const full = ts[0];
      log(
        `bench: cpu ${m} min: ${ts.map((t) => `${t.policy}${t.variant ? ':' + t.variant : ''} ${t.msPerToken.toFixed(1)}`).join(', ')} ms/token`,
      );
      be.dispose();
      for (const t of ts)
        rows.push({
          backend: 'cpu (TypeScript)',
          minutes: m,
          audioTokens: N,
          ...t,
          msPerTokenVsFull: t.msPerToken / full.msPerToken,
        });
    }
  }
  if (backends.includes('webgpu')) {
    const gpuRows = await benchWebGpu({
      modelDir,
      hasModel: existsSync(`${modelDir}/decoder.safetensors`),
      heads,
      minutes,
      steps,
      log,
      kv,
      softwareMaxMinutes: Number(arg('software-max-minutes', '1')),
      timing,
    });
    rows.push(...gpuRows);
  }
  const result = { model: modelLabel, kv, steps, pipeline, rows };
  if (json) {
    console.log(JSON.stringify(result, null, 1));
    return;
  }
  console.log(
    `Model: ${modelLabel}; ${kv} KV pool; decode ms/token is the median of ${steps} steps; ` +
      `${pipeline ? 'pipelined where the policy allows' : 'waiting loop (--no-pipeline)'}.\n`,
  );
  console.log(
    '| backend | audio | tokens | policy | loop | prefill tok/s | decode ms/token | vs full | r_GPU | ' +
      'recalled MB/step (max) | GPU KV MiB | dispatches/step (/layer) | submits/step | CPU waits/step | ' +
      'readback B/step | CPU→GPU B/step |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const policy = `${r.policy}${r.policy === 'full' ? '' : ` @${r.budget}`}${r.variant ? ` ${r.variant}` : ''}`;
    console.log(
      `| ${r.backend} | ${r.minutes} min | ${r.audioTokens} | ${policy} | ${r.pipelined ? 'pipelined' : 'waiting'} | ` +
        `${Number.isNaN(r.prefillTokensPerSecond) ? 'same as full' : r.prefillTokensPerSecond.toFixed(0)} | ` +
        `${r.msPerToken.toFixed(2)} | ${r.msPerTokenVsFull.toFixed(3)} | ${r.rGpu.toFixed(3)} | ` +
        `${r.mbPerStep.toFixed(3)} (${r.mbPerStepMax.toFixed(3)}) | ${r.gpuKvMiB.toFixed(1)} | ` +
        `${r.dispatchesPerStep.toFixed(0)} (${r.dispatchesPerLayer.toFixed(0)}) | ${r.submitsPerStep.toFixed(2)} | ` +
        `${r.cpuWaitsPerStep.toFixed(2)} | ${r.readbackBytesPerStep.toFixed(0)} | ${r.bytesToGpuPerStep.toFixed(0)} |`,
    );
  }
}

main().catch((e) => {
  console.error(`bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  process.exit(1);
});
