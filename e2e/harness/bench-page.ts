/**
 * WebGPU rows of `npm run bench`, run inside Chromium: the same `timePolicy` as the
 * CPU rows, on the WebGPU backend. The Node side calls window.wnwBench(opts).
 */
import { createWebGpuBackend } from '../../src/backend/webgpu/index.js';
import { syntheticHeads, timePolicy, type TimingOptions } from '../../src/bench/decode.js';
import { runGpuBench, type GpuBenchRequest } from '../../src/bench/gpu-run.js';
import { measureMemory } from '../../src/bench/memory-measure.js';
import { measureGpuForward } from '../../src/bench/calibration-cost-gpu.js';
import { loadModel } from '../../src/model/loader.js';
import { hostRunOf, hostTimes, type HostPageRequest } from '../../src/bench/host.js';
import { standInTimes, type StandInRequest } from '../../src/bench/host-cpu.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import type { HeadsFile } from '../../src/model/heads.js';
import type { KvPrecision } from '../../src/kv/precision.js';

interface BenchRequest {
  model: string | null;
  minutes: number[];
  steps: number;
  heads: HeadsFile;
  kv: KvPrecision;
  timing?: TimingOptions & { withPaperLag?: boolean };
}

async function wnwBench(req: BenchRequest) {
  const m = req.model ? await loadModel(req.model) : null;
  const config = m?.config ?? referenceConfig();
  const weights = m?.weights ?? randomDecoderWeights(config, 1);
  const backend = await createWebGpuBackend(config, weights, { allowSoftware: true, kvPrecision: req.kv });
  const rows = [];
  for (const minutes of req.minutes) {
    const N = Math.round(minutes * 60 * config.audio.tokensPerSecond);
    const emb = randomEmbeddings(config, N, 5);
    const full = await timePolicy(backend, config, emb, N, 'full', 1, req.heads, req.steps, req.timing);
    const ts = [
      full,
      await timePolicy(backend, config, emb, N, 'wnw', 0.2, m?.heads ?? req.heads, req.steps, req.timing),
    ];
    if (req.timing?.withPaperLag)
      ts.push({
        ...(await timePolicy(backend, config, emb, N, 'wnw', 0.2, m?.heads ?? req.heads, req.steps, {
          ...req.timing,
          policyOptions: { planLag: 1 },
        })),
        variant: 'planLag=1',
      });
    for (const t of ts)
      rows.push({
        backend: backend.label,
        minutes,
        audioTokens: N,
        ...t,
        msPerTokenVsFull: t.msPerToken / full.msPerToken,
      });
  }
  backend.dispose();
  return rows;
}

/** `npm run bench:gpu` in the page (src/bench/gpu.ts): the same run as in Node, on this page's adapter. */
async function wnwBenchGpu(r: { req: GpuBenchRequest; model: string | null }) {
  const m = r.model ? await loadModel(r.model) : null;
  const config = m?.config ?? referenceConfig();
  const weights = m?.weights ?? randomDecoderWeights(config, 1);
  const reference = {
    config,
    weights,
    heads: m?.heads ?? syntheticHeads(config, 750),
    label: m ? `${config.name} (trained)` : `${config.name} (random weights)`,
  };
  return runGpuBench(
    r.req,
    (c, w) => createWebGpuBackend(c, w, { allowSoftware: true }),
    reference,
    (s) => console.log(s),
  );
}

/** `npm run bench -- --host` in the page (src/bench/host-main.ts): host time per decode step. */
async function wnwHost(req: HostPageRequest) {
  const { run, weights } = hostRunOf(req);
  const backend = await createWebGpuBackend(run.config, weights, { allowSoftware: true, kvPrecision: req.kv });
  try {
    return await hostTimes(backend, run, (s) => console.log(s));
  } finally {
    backend.dispose();
  }
}

/** `npm run bench -- --host --stand-in` in the page (src/bench/host-cpu.ts): the step's JavaScript, no device. */
function wnwStandIn(req: StandInRequest) {
  return standInTimes(req, `Chromium ${navigator.userAgent.match(/Chrome\/([\d.]+)/)?.[1] ?? ''}`.trim(), (s) =>
    console.log(s),
  );
}

(window as unknown as { wnwBench: typeof wnwBench }).wnwBench = wnwBench;
(window as unknown as { wnwHost: typeof wnwHost }).wnwHost = wnwHost;
(window as unknown as { wnwStandIn: typeof wnwStandIn }).wnwStandIn = wnwStandIn;
(window as unknown as { wnwBenchGpu: typeof wnwBenchGpu }).wnwBenchGpu = wnwBenchGpu;
(window as unknown as { wnwMeasure: typeof measureMemory }).wnwMeasure = measureMemory;
(window as unknown as { wnwGpuForward: typeof measureGpuForward }).wnwGpuForward = measureGpuForward;
document.getElementById('status')!.textContent = 'ready';
