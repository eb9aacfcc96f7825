/** Small helpers shared by the GPU harness pages: upload, read back, compare. */
import { GpuContext, type Bindings } from '../../src/gpu/device.js';
import { PipelineCache } from '../../src/gpu/pipelines.js';
import { Op, record, type Dispatch } from '../../src/gpu/op.js';

export interface CheckResult {
  name: string;
  pass: boolean;
  /** Normalised mean squared error against the TS reference, and its bound. */
  nmse?: number;
  bound?: number;
  /** Share of non-zero outputs (a kernel over limits can silently write zeros). */
  nonZero?: number;
  detail: string;
  ms: number;
}

let shared: Promise<{ ctx: GpuContext; cache: PipelineCache }> | null = null;

export function gpu(): Promise<{ ctx: GpuContext; cache: PipelineCache }> {
  shared ??= GpuContext.acquire().then((ctx) => ({ ctx, cache: new PipelineCache(ctx) }));
  return shared;
}

export function upload(ctx: GpuContext, data: ArrayBufferView, label = 'test'): GPUBuffer {
  return ctx.buffer(
    label,
    data.byteLength,
    GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
    data,
  );
}

export function empty(ctx: GpuContext, bytes: number, label = 'test'): GPUBuffer {
  return ctx.buffer(label, bytes);
}

export async function read(ctx: GpuContext, buf: GPUBuffer, bytes = buf.size): Promise<ArrayBuffer> {
  const size = Math.ceil(bytes / 4) * 4;
  const staging = ctx.device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = ctx.device.createCommandEncoder();
  enc.copyBufferToBuffer(buf, 0, staging, 0, size);
  ctx.device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = staging.getMappedRange().slice(0, bytes);
  staging.unmap();
  staging.destroy();
  return out;
}

export async function readF32(ctx: GpuContext, buf: GPUBuffer, n: number): Promise<Float32Array> {
  return new Float32Array(await read(ctx, buf, n * 4));
}

/** One dispatch in its own submit. */
/** One dispatch of a pipeline (or an op's, bound by number here) in its own submit. */
export function dispatch(
  ctx: GpuContext,
  kernel: GPUComputePipeline | Op,
  resources: Bindings,
  x: number,
  y = 1,
): void {
  const pipeline = kernel instanceof Op ? kernel.pipeline : kernel;
  const bg = ctx.bindGroup(pipeline, resources);
  const enc = ctx.device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bg);
  pass.dispatchWorkgroups(x, y);
  pass.end();
  ctx.device.queue.submit([enc.finish()]);
}

/** An op's dispatches, each in its own submit. */
export function submit(ctx: GpuContext, ...ds: Dispatch[]): void {
  for (const d of ds) {
    const enc = ctx.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    record(pass, d);
    pass.end();
    ctx.device.queue.submit([enc.finish()]);
  }
}

export function nmse(ref: ArrayLike<number>, got: ArrayLike<number>): number {
  if (ref.length !== got.length) return Infinity;
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = ref[i] - got[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (!Number.isFinite(num)) return Infinity;
  return den === 0 ? (num === 0 ? 0 : Infinity) : num / den;
}

export function nonZero(a: ArrayLike<number>): number {
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== 0 && Number.isFinite(a[i])) n++;
  return a.length ? n / a.length : 0;
}

/** Passes when nmse <= bound and at least `minNonZero` of the outputs are non-zero. */
export function compare(
  name: string,
  ref: ArrayLike<number>,
  got: ArrayLike<number>,
  bound: number,
  t0: number,
  minNonZero = 0.5,
  extra = '',
): CheckResult {
  const e = nmse(ref, got);
  const nz = nonZero(got);
  const pass = e <= bound && nz >= minNonZero;
  return {
    name,
    pass,
    nmse: e,
    bound,
    nonZero: nz,
    ms: performance.now() - t0,
    detail: `n=${ref.length} nmse=${e.toExponential(2)} (bound ${bound}) nonZero=${nz.toFixed(3)}${extra ? ' ' + extra : ''}`,
  };
}

type Checks = Record<string, () => Promise<CheckResult>>;

/**
 * Exposes a page's checks to the Playwright specs as window.wnwGpu ({ names, run } and
 * `extra`) and marks the page ready. A check that throws is a failed result carrying the
 * error, so one broken check does not end the spec's page.
 */
export function exposeChecks(checks: Checks, extra: Record<string, unknown> = {}): void {
  const run = async (name: string): Promise<CheckResult> => {
    const t = checks[name];
    if (!t) return { name, pass: false, detail: `no such check: ${name}`, ms: 0 };
    try {
      return await t();
    } catch (e) {
      const err = e as Error;
      return { name, pass: false, detail: `${err.name}: ${err.message}\n${err.stack ?? ''}`, ms: 0 };
    }
  };
  (window as unknown as { wnwGpu: unknown }).wnwGpu = { names: Object.keys(checks), run, ...extra };
  document.getElementById('status')!.textContent = 'ready';
}
