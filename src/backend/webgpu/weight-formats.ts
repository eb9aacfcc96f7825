/**
 * Weight matrices of any format (src/model/quant.ts) on the GPU: uploaded as row parts no
 * larger than one storage binding, the matvec/matmul pipelines specialised to the format,
 * and the per-part matvec dispatches that together write one output vector (a 131,072-row
 * lm_head in q4 is 226 MB, more than many adapters bind at once).
 */
import { WEIGHT_FORMAT_ID, rowBytes, sliceRows, splitRows, type PackedMatrix, type RowPart, type WeightFormat } from '../../model/quant.js';
import type { Bindings, GpuContext } from '../../gpu/device.js';
import { matmulGroups, matvecGroups } from './kernels.js';
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';
import type { DeviceLimits } from './fit.js';

export interface GpuMatrixPart extends RowPart {
  buffer: GPUBuffer;
}

export interface GpuMatrix {
  name: string;
  format: WeightFormat;
  rows: number;
  cols: number;
  parts: GpuMatrixPart[];
  bytes: number;
}

/** The device's per-buffer limits, each lowered to `cap` where one is set (tests). */
export function bindingLimits(ctx: GpuContext, cap = Infinity): DeviceLimits {
  const { maxStorageBufferBindingSize, maxBufferSize } = ctx.limits;
  return { maxStorageBufferBindingSize: Math.min(maxStorageBufferBindingSize, cap), maxBufferSize: Math.min(maxBufferSize, cap) };
}

/** The largest buffer one storage binding of this device takes; `cap` lowers it (tests). */
export function bindingLimit(ctx: GpuContext, cap = Infinity): number {
  return Math.min(ctx.limits.maxStorageBufferBindingSize, ctx.limits.maxBufferSize, cap);
}

/** One buffer holding rows [row0, row0 + rows) of a matrix, already packed. */
export function uploadPart(ctx: GpuContext, label: string, part: RowPart, data: Uint32Array): GpuMatrixPart {
  return { ...part, buffer: ctx.buffer(label, data.byteLength, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, data) };
}

/** Uploads `m` split by rows into buffers of at most `maxBytes`. */
export async function uploadMatrix(ctx: GpuContext, name: string, m: PackedMatrix, maxBytes = bindingLimit(ctx)): Promise<GpuMatrix> {
  const plan = splitRows(m.format, m.rows, m.cols, maxBytes);
  const bytes = m.rows * rowBytes(m.format, m.cols);
  const parts = await ctx.allocating(name, bytes, () =>
    plan.map((p, i) => uploadPart(ctx, plan.length > 1 ? `${name}[${i}]` : name, p, sliceRows(m, p.row0, p.rows).data)),
  );
  return { name, format: m.format, rows: m.rows, cols: m.cols, parts, bytes };
}

export function destroyMatrix(ctx: GpuContext, m: GpuMatrix): void {
  for (const p of m.parts) ctx.destroy(p.buffer);
}

export interface FormatKernels {
  format: WeightFormat;
  matvec: GPUComputePipeline;
  matvecAdd: GPUComputePipeline;
  matvecSwiglu: GPUComputePipeline;
  matmul: GPUComputePipeline;
  matmulAdd: GPUComputePipeline;
}

/** The constants that specialise matvec.wgsl / matmul.wgsl to a format. */
export function formatConstants(format: WeightFormat, acc: boolean): Constants {
  return { ACC: acc, WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] };
}

/** The dense products for weights of one format (the pipeline cache shares them across models). */
export async function loadFormatKernels(cache: PipelineCache, format: WeightFormat): Promise<FormatKernels> {
  const [matvec, matvecAdd, matvecSwiglu, matmul, matmulAdd] = await Promise.all([
    cache.get('matvec.wgsl', 'matvec', formatConstants(format, false)),
    cache.get('matvec.wgsl', 'matvec', formatConstants(format, true)),
    cache.get('matvec.wgsl', 'matvec_swiglu', formatConstants(format, false)),
    cache.get('matmul.wgsl', 'matmul', formatConstants(format, false)),
    cache.get('matmul.wgsl', 'matmul', formatConstants(format, true)),
  ]);
  return { format, matvec, matvecAdd, matvecSwiglu, matmul, matmulAdd };
}

export interface PartDispatch {
  bindings: Bindings;
  groups: [number, number];
  /** The part's uniform (rows, cols, 1, xOff): the caller owns and destroys it. */
  uniform: GPUBuffer;
}

/**
 * y = W x as one dispatch per row part of W: part i writes y[row0 .. row0 + rows) through
 * a binding offset (row0 is a multiple of 64, so the offset is 256-byte aligned). Build
 * once per (matrix, x, y) and replay every step; nothing here allocates per step.
 */
export function matvecDispatches(ctx: GpuContext, m: GpuMatrix, x: GPUBuffer, y: GPUBuffer, xOff = 0): PartDispatch[] {
  return m.parts.map((p) => {
    const uniform = ctx.uniform(`${m.name}.u`, [p.rows, m.cols, 1, xOff]);
    const out = m.parts.length === 1 ? y : { buffer: y, offset: p.row0 * 4, size: p.rows * 4 };
    return { bindings: [p.buffer, x, out, uniform], groups: matvecGroups(p.rows), uniform };
  });
}

/** Y[n, rows] = X Wᵀ for a matrix in one part (prefill matrices: layers, never lm_head). */
export function matmulDispatch(ctx: GpuContext, m: GpuMatrix, x: GPUBuffer, y: GPUBuffer, n: number, xOff = 0): PartDispatch {
  if (m.parts.length !== 1) throw new RangeError(`${m.name} is split into ${m.parts.length} bindings; the prefill matmul takes one`);
  const uniform = ctx.uniform(`${m.name}.u`, [m.rows, m.cols, n, xOff]);
  return { bindings: [m.parts[0].buffer, x, y, uniform], groups: matmulGroups(m.rows, n), uniform };
}
