/**
 * Weight matrices of any format (src/model/quant.ts) on the GPU: uploaded as row parts no
 * larger than one storage binding (a 131,072-row lm_head in q4 is 226 MB, more than many
 * adapters bind at once); product-ops.ts runs the products over those parts.
 */
import {
  WEIGHT_FORMAT_ID,
  rowBytes,
  sliceRows,
  splitRows,
  type PackedMatrix,
  type RowPart,
  type WeightFormat,
} from '../../model/quant.js';
import type { GpuContext } from '../../gpu/device.js';
import type { Constants } from '../../gpu/pipelines.js';
import type { DeviceLimits } from './fit-bindings.js';

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
  return {
    maxStorageBufferBindingSize: Math.min(maxStorageBufferBindingSize, cap),
    maxBufferSize: Math.min(maxBufferSize, cap),
  };
}

/** The largest buffer one storage binding of this device takes; `cap` lowers it (tests). */
export function bindingLimit(ctx: GpuContext, cap = Infinity): number {
  return Math.min(ctx.limits.maxStorageBufferBindingSize, ctx.limits.maxBufferSize, cap);
}

/** One buffer holding rows [row0, row0 + rows) of a matrix, already packed. */
export function uploadPart(ctx: GpuContext, label: string, part: RowPart, data: Uint32Array): GpuMatrixPart {
  return {
    ...part,
    buffer: ctx.buffer(label, data.byteLength, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, data),
  };
}

/** Uploads `m` split by rows into buffers of at most `maxBytes`. */
export async function uploadMatrix(
  ctx: GpuContext,
  name: string,
  m: PackedMatrix,
  maxBytes = bindingLimit(ctx),
): Promise<GpuMatrix> {
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

/** The constants that specialise matvec.wgsl / matmul.wgsl to a format. */
export function formatConstants(format: WeightFormat, acc: boolean): Constants {
  return { ACC: acc, WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] };
}
