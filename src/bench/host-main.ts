/**
 * `npm run bench -- --host [--shape voxtral-mini-3b] [--minutes 30] [--steps 16] [--layers all]
 *                  [--kv f32|f16] [--bandwidth 300] [--backends node,chromium] [--policies full,wnw,quest] [--json]
 *                  [--stand-in [--evict-mib 0,512] [--segments-per-step 2]]`
 *
 * Host time per decode step (./host.ts) at a real backbone's decoder shape, every layer
 * unless --layers says fewer, random q4 weights, the KV pool placed as `--minutes` of audio
 * would fill it, for the full cache, WnW at 0.2 and Quest at 0.2; on WebGPU in Node (Dawn)
 * and in headless Chromium. On a software adapter the compute is slow but is not what is
 * timed: the host figures are the page's, whatever the adapter. `--stand-in` times instead the
 * step's JavaScript over a device that runs nothing, with the caches left alone or evicted
 * before each step (./host-cpu.ts), in Node and in the page.
 */
import { parseKvPrecision } from '../cli/args.js';
import type { PolicyName } from '../index.js';
import { HOST_PHASES, HOST_POLICIES, hostRunOf, hostTimes, type HostPageRequest, type HostRow } from './host.js';
import { DECODER_SHAPES } from './shapes.js';
import { onHarnessPage } from './webgpu.js';
import { STAND_IN_PHASES, STAND_IN_POLICIES, standInTimes, type StandInRequest, type StandInRow } from './host-cpu.js';

/** The run the page (or Node) rebuilds, and where and how its rows are printed. */
export interface HostBenchOptions extends HostPageRequest {
  backends: ('node' | 'chromium')[];
  json: boolean;
  /** The step's JavaScript over a stand-in device (./host-cpu.ts) instead of a WebGPU session. */
  standIn?: { evictMiB: number[]; segmentsPerStep: number };
}

function value(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

export function parseHostBenchArgs(argv: string[]): HostBenchOptions {
  const shape = value(argv, 'shape') ?? 'voxtral-mini-3b';
  const s = DECODER_SHAPES[shape];
  if (!s)
    throw new RangeError(
      `unknown decoder shape ${JSON.stringify(shape)}; known: ${Object.keys(DECODER_SHAPES).join(', ')}`,
    );
  const l = value(argv, 'layers') ?? 'all';
  const layers = l === 'all' ? s.totalLayers : Number(l);
  if (!Number.isInteger(layers) || layers < 1 || layers > s.totalLayers)
    throw new RangeError(`--layers must be all or 1..${s.totalLayers}, got ${l}`);
  const minutes = (value(argv, 'minutes') ?? '30').split(',').map(Number);
  if (!minutes.every((m) => m > 0))
    throw new RangeError(`--minutes takes positive numbers, got ${value(argv, 'minutes')}`);
  const steps = Number(value(argv, 'steps') ?? '16');
  if (!Number.isInteger(steps) || steps < 2)
    throw new RangeError(`--steps must be an integer ≥ 2, got ${value(argv, 'steps')}`);
  const bandwidthGBs = Number(value(argv, 'bandwidth') ?? '300');
  if (!(bandwidthGBs > 0)) throw new RangeError(`--bandwidth takes GB/s, got ${value(argv, 'bandwidth')}`);
  const backends = (value(argv, 'backends') ?? 'node,chromium').split(',');
  for (const b of backends)
    if (b !== 'node' && b !== 'chromium') throw new RangeError(`--backends takes node and chromium, got ${b}`);
  const known = HOST_POLICIES.map(([name]) => name);
  const policies = value(argv, 'policies')?.split(',');
  for (const p of policies ?? [])
    if (!known.includes(p as PolicyName)) throw new RangeError(`--policies takes ${known.join(', ')}, got ${p}`);
  const evictMiB = (value(argv, 'evict-mib') ?? '0,512').split(',').map(Number);
  if (!evictMiB.every((m) => Number.isInteger(m) && m >= 0))
    throw new RangeError(`--evict-mib takes whole MiB ≥ 0, got ${value(argv, 'evict-mib')}`);
  const segmentsPerStep = Number(value(argv, 'segments-per-step') ?? '2');
  if (!(Number.isInteger(segmentsPerStep) && segmentsPerStep >= 0))
    throw new RangeError(`--segments-per-step takes a whole number ≥ 0, got ${value(argv, 'segments-per-step')}`);
  const standIn = argv.includes('--stand-in');
  for (const p of (standIn && policies) || [])
    if (!STAND_IN_POLICIES.includes(p as PolicyName))
      throw new RangeError(
        `--stand-in times ${STAND_IN_POLICIES.join(' and ')}: ${p} plans from what only a device computes`,
      );
  return {
    ...(standIn ? { standIn: { evictMiB, segmentsPerStep } } : {}),
    shape,
    layers,
    minutes,
    steps,
    kv: parseKvPrecision(value(argv, 'kv') ?? 'f32'),
    bandwidthGBs,
    backends: backends as ('node' | 'chromium')[],
    ...(policies ? { policies: policies as PolicyName[] } : {}),
    json: argv.includes('--json'),
  };
}

async function nodeRows(req: HostPageRequest, log: (s: string) => void): Promise<HostRow[]> {
  const { createWebGpuBackend } = await import('../backend/webgpu/index.js');
  const { requestGpuAdapter, describeAdapter } = await import('../gpu/device.js');
  const adapter = await requestGpuAdapter().catch(() => null);
  if (!adapter || describeAdapter(adapter).software) {
    log('bench: no hardware WebGPU in Node: no Node rows');
    return [];
  }
  const { run, weights } = hostRunOf(req);
  let backend;
  try {
    // Hardware only: Dawn in Node fails natively (a crash, not an error) compiling these kernels on SwiftShader.
    backend = await createWebGpuBackend(run.config, weights, { allowSoftware: false, kvPrecision: req.kv });
  } catch (e) {
    log(`bench: no hardware WebGPU in Node (${e instanceof Error ? e.message.split('\n')[0] : String(e)})`);
    return [];
  }
  try {
    return (await hostTimes(backend, run, log)).map((r) => ({ ...r, backend: `${r.backend} in Node (Dawn)` }));
  } finally {
    backend.dispose();
  }
}

/** The harness page's `name` (e2e/harness/bench-page.ts) run on `req`; null where there is no Chromium. */
function inPage<R>(name: 'wnwHost' | 'wnwStandIn', req: unknown, log: (s: string) => void): Promise<R[] | null> {
  return onHarnessPage(log, (page) =>
    page.evaluate(([n, r]) => (window as unknown as Record<string, (r: unknown) => Promise<R[]>>)[n](r), [
      name,
      req,
    ] as const),
  );
}

async function chromiumRows(req: HostPageRequest, log: (s: string) => void): Promise<HostRow[]> {
  const rows = await inPage<HostRow>('wnwHost', req, log);
  return (rows ?? []).map((r) => ({ ...r, backend: `${r.backend} in headless Chromium` }));
}

export function formatHostRows(rows: HostRow[]): string {
  const lines = [
    `| backend | audio | policy | loop | host ms median | p95 | mean | min | ${HOST_PHASES.join(' | ')} | ` +
      'writeBuffer | createBindGroup | createBuffer | mapAsync | recalled/step | recalled KB/step | steps recalling | recall copy ms | ' +
      'weight floor ms | host / floor |',
    `|${'---|'.repeat(21)}`,
  ];
  const f = (x: number) => x.toFixed(3);
  for (const r of rows) {
    const c = r.callsPerStep;
    lines.push(
      `| ${r.backend} | ${r.minutes} min (${r.audioTokens}) | ${r.policy}${r.policy === 'full' ? '' : `@${r.budget}`} | ` +
        `${r.loop} | ${f(r.hostMs.median)} | ${f(r.hostMs.p95)} | ${f(r.hostMs.mean)} | ${f(r.hostMs.min)} | ` +
        `${HOST_PHASES.map((k) => f(r.hostMs.byPhase[k])).join(' | ')} | ` +
        `${c.writeBuffer.toFixed(1)} | ${c.createBindGroup.toFixed(1)} | ${c.createBuffer.toFixed(1)} | ` +
        `${c.mapAsync.toFixed(1)} | ${r.recalledPerStep.toFixed(0)} | ${(r.recalledBytesPerStep / 1024).toFixed(1)} | ` +
        `${r.recallSteps} of ${r.steps} | ${f(r.recallCopyMs)} | ${f(r.weightFloorMs)} | ${r.hostOverFloor.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

async function standInRows(req: StandInRequest, backends: HostBenchOptions['backends'], log: (s: string) => void) {
  const rows: StandInRow[] = [];
  if (backends.includes('node')) rows.push(...(await standInTimes(req, `Node ${process.version}`, log)));
  if (backends.includes('chromium')) rows.push(...((await inPage<StandInRow>('wnwStandIn', req, log)) ?? []));
  return rows;
}

export function formatStandInRows(rows: StandInRow[]): string {
  const f = (x: number) => x.toFixed(3);
  return [
    `| runtime | audio | policy | caches evicted (MiB) | ms median | p95 | min | ${STAND_IN_PHASES.join(' | ')} | recalled/step | copies/step | scatter dispatches/step |`,
    `|${'---|'.repeat(13)}`,
    ...rows.map(
      (r) =>
        `| ${r.runtime} | ${r.minutes} min (${r.audioTokens}) | ${r.policy}${r.policy === 'full' ? '' : `@${r.budget}`} | ` +
        `${r.evictMiB} | ${f(r.ms.median)} | ${f(r.ms.p95)} | ${f(r.ms.min)} | ` +
        `${STAND_IN_PHASES.map((k) => f(r.ms.medianByPhase[k])).join(' | ')} | ${r.recalledPerStep.toFixed(0)} | ${r.copiesPerStep.toFixed(2)} | ${r.dispatchesPerStep.toFixed(2)} |`,
    ),
  ].join('\n');
}

export async function hostBenchMain(argv: string[], log: (s: string) => void): Promise<void> {
  const o = parseHostBenchArgs(argv);
  const req: HostPageRequest = {
    shape: o.shape,
    layers: o.layers,
    minutes: o.minutes,
    steps: o.steps,
    kv: o.kv,
    bandwidthGBs: o.bandwidthGBs,
    policies: o.policies,
  };
  if (o.standIn) {
    const rows = await standInRows({ ...req, ...o.standIn }, o.backends, log);
    console.log(
      o.json
        ? JSON.stringify(
            { shape: o.shape, layers: o.layers, kv: o.kv, steps: o.steps, ...o.standIn, standIn: rows },
            null,
            1,
          )
        : `The step's JavaScript over a stand-in device, ${o.shape}, ${o.layers} layers, ${o.kv} KV, ` +
            `the chunk choice moving ${o.standIn.segmentsPerStep} segments a step; medians in ms.\n\n${formatStandInRows(rows)}`,
    );
    return;
  }
  const rows: HostRow[] = [];
  if (o.backends.includes('node')) rows.push(...(await nodeRows(req, log)));
  if (o.backends.includes('chromium')) rows.push(...(await chromiumRows(req, log)));
  const report = { shape: o.shape, layers: o.layers, kv: o.kv, steps: o.steps, bandwidthGBs: o.bandwidthGBs, rows };
  console.log(
    o.json
      ? JSON.stringify(report, null, 1)
      : `Host time per decode step, ${o.shape}, ${o.layers} layers, random q4 weights, ${o.kv} KV, ` +
          `mean ms per phase; floor at ${o.bandwidthGBs} GB/s.\n\n${formatHostRows(rows)}`,
  );
}
