/**
 * The typed calls of the weight products (matvec.wgsl, matmul.wgsl, bindings in
 * product.wgsl), one set per weight format: W [rows, cols] as a GpuMatrix, X, Y and the
 * (rows, cols, n, xOff) uniform, written here once for the backend and the kernel tests.
 */
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';
import { Op, type Binding, type Dispatch, type UniformOf } from '../../gpu/op.js';
import type { WeightFormat } from '../../model/quant.js';
import { matmulGroups, matvecGroups } from './groups.js';
import { formatConstants, type GpuMatrix } from './weight-formats.js';

/** The single buffer of a matrix its kernel reads whole (checked at upload). */
export function whole(m: GpuMatrix): GPUBuffer {
  if (m.parts.length !== 1)
    throw new RangeError(`${m.name} is split into ${m.parts.length} bindings; its kernel reads it whole`);
  return m.parts[0].buffer;
}

/** y (+)= W x, x read from float xOff. */
export class Matvec extends Op {
  /**
   * One dispatch per row part of W: part i writes y[row0 .. row0 + rows) through a binding
   * offset (row0 is a multiple of 64, so the offset is 256-byte aligned), so a matrix larger
   * than one binding still writes one output vector.
   */
  run(b: { w: GpuMatrix; x: Binding; y: GPUBuffer }, u: UniformOf, xOff = 0): Dispatch[] {
    const { w, x, y } = b;
    this.need('x', x, 4 * (xOff + w.cols));
    this.need('y', y, 4 * w.rows);
    return w.parts.map((p) => {
      const out = w.parts.length === 1 ? y : { buffer: y, offset: p.row0 * 4, size: p.rows * 4 };
      return this.dispatch([p.buffer, x, out, u(`${w.name}.u`, [p.rows, w.cols, 1, xOff])], ...matvecGroups(p.rows));
    });
  }
}

/** y[r] = silu(Wg[r]·x)·(Wu[r]·x) with W = [gate; up] read whole: y has half W's rows. */
export class MatvecSwiglu extends Op {
  run(b: { w: GpuMatrix; x: Binding; y: Binding }, u: UniformOf, xOff = 0): Dispatch {
    const rows = b.w.rows / 2;
    this.need('x', b.x, 4 * (xOff + b.w.cols));
    this.need('y', b.y, 4 * rows);
    return this.dispatch([whole(b.w), b.x, b.y, u(`${b.w.name}.u`, [rows, b.w.cols, 1, xOff])], ...matvecGroups(rows));
  }
}

/** Y[n, rows] (+)= X[n, cols] Wᵀ, W read whole. */
export class Matmul extends Op {
  run(b: { w: GpuMatrix; x: Binding; y: Binding }, n: number, u: UniformOf): Dispatch {
    const { w, x, y } = b;
    this.need('x', x, 4 * n * w.cols);
    this.need('y', y, 4 * n * w.rows);
    return this.dispatch([whole(w), x, y, u(`${w.name}.u`, [w.rows, w.cols, n, 0])], ...matmulGroups(w.rows, n));
  }
}

export interface ProductOps {
  format: WeightFormat;
  matvec: Matvec;
  /** The residual add fused in: y += W x. */
  matvecAdd: Matvec;
  matvecSwiglu: MatvecSwiglu;
  matmul: Matmul;
  matmulAdd: Matmul;
}

/**
 * The dense products for weights of one format (the pipeline cache shares them across
 * models); `constants` go in besides the format's (the catalogue passes the model's).
 */
export async function loadProductOps(
  cache: PipelineCache,
  format: WeightFormat,
  constants: Constants = {},
  counted: (p: Promise<GPUComputePipeline>) => Promise<GPUComputePipeline> = (p) => p,
): Promise<ProductOps> {
  const get = (file: string, entry: string, acc: boolean) =>
    counted(cache.get(file, entry, { ...constants, ...formatConstants(format, acc) }));
  const [matvec, matvecAdd, matvecSwiglu, matmul, matmulAdd] = await Promise.all([
    get('matvec.wgsl', 'matvec', false),
    get('matvec.wgsl', 'matvec', true),
    get('matvec.wgsl', 'matvec_swiglu', false),
    get('matmul.wgsl', 'matmul', false),
    get('matmul.wgsl', 'matmul', true),
  ]);
  const ctx = cache.ctx;
  return {
    format,
    matvec: new Matvec(ctx, matvec, `matvec ${format}`),
    matvecAdd: new Matvec(ctx, matvecAdd, `matvec+ ${format}`),
    matvecSwiglu: new MatvecSwiglu(ctx, matvecSwiglu, `matvec_swiglu ${format}`),
    matmul: new Matmul(ctx, matmul, `matmul ${format}`),
    matmulAdd: new Matmul(ctx, matmulAdd, `matmul+ ${format}`),
  };
}
