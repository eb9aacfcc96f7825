/**
 * Pipelines of the encoder's shaders (shaders/encoder_*.wgsl, one kernel each) and the
 * recording of their dispatches: the kernels the WebGPU Whisper-family encoder
 * (./webgpu.ts) is built from, each checked against its TS reference in ./ops.ts by
 * e2e/encoder.spec.ts.
 */
import type { GpuContext } from '../gpu/device.js';
import type { Constants, PipelineCache } from '../gpu/pipelines.js';
import { WEIGHT_FORMAT_ID, type WeightFormat } from '../model/quant.js';

export function encoderConstants(over: Constants): Constants {
  return { CIN: 4, COUT: 4, STRIDE: 1, POS: false, D: 4, EPS: { f32: 1e-5 }, BIAS: false, GELU: false, ACC: false, WEIGHT_FORMAT: 0, HD: 1, SCALE: { f32: 1 }, ...over };
}

/** Splits `n` workgroups over x and a second axis, each at most 65535. */
export function split(n: number): [number, number] {
  return [Math.min(Math.max(n, 1), 65535), Math.max(1, Math.ceil(n / 65535))];
}

export class EncoderKernels {
  private constructor(private readonly cache: PipelineCache) {}

  static create(cache: PipelineCache): EncoderKernels {
    return new EncoderKernels(cache);
  }

  conv(cin: number, cout: number, stride: number, pos: boolean): Promise<GPUComputePipeline> {
    return this.cache.get('encoder_conv.wgsl', 'conv_k3', encoderConstants({ CIN: cin, COUT: cout, STRIDE: stride, POS: pos }));
  }

  layerNorm(d: number, eps = 1e-5): Promise<GPUComputePipeline> {
    return this.cache.get('encoder_layer_norm.wgsl', 'layer_norm', encoderConstants({ D: d, EPS: { f32: eps } }));
  }

  linear(bias: boolean, gelu: boolean, acc: boolean, format: WeightFormat = 'f32'): Promise<GPUComputePipeline> {
    return this.cache.get('encoder_linear.wgsl', 'linear', encoderConstants({ BIAS: bias, GELU: gelu, ACC: acc, WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] }));
  }

  attention(d: number, hd: number): Promise<GPUComputePipeline> {
    return this.cache.get('encoder_attention.wgsl', 'attention', encoderConstants({ D: d, HD: hd, SCALE: { f32: 1 / Math.sqrt(hd) } }));
  }

  avgPool2(d: number): Promise<GPUComputePipeline> {
    return this.cache.get('encoder_avg_pool.wgsl', 'avg_pool2', encoderConstants({ D: d }));
  }
}

/** Records dispatches of the encoder kernels into one compute pass. */
export class EncoderPass {
  private readonly uniforms: GPUBuffer[] = [];
  constructor(private readonly ctx: GpuContext, readonly pass: GPUComputePassEncoder) {}

  private run(p: GPUComputePipeline, bind: Record<number, GPUBuffer>, x: number, y = 1, z = 1): void {
    this.pass.setPipeline(p);
    this.pass.setBindGroup(0, this.ctx.bindGroup(p, bind));
    this.pass.dispatchWorkgroups(x, y, z);
  }

  private dims(a: number, b = 0, c = 0, d = 0): GPUBuffer {
    const u = this.ctx.uniform('encoder dims', [a, b, c, d]);
    this.uniforms.push(u);
    return u;
  }

  /** conv_k3 over a batch of windows: winIn mel rows per window in, winOut rows out. */
  conv(p: GPUComputePipeline, x: GPUBuffer, w: GPUBuffer, b: GPUBuffer, pos: GPUBuffer, y: GPUBuffer, cout: number, inRows: number, outRows: number, winIn: number, winOut: number): void {
    const [gy, gz] = split(outRows);
    this.run(p, { 0: x, 1: w, 2: b, 3: pos, 4: y, 5: this.dims(inRows, outRows, winIn, winOut) }, Math.ceil(cout / 64), gy, gz);
  }

  layerNorm(p: GPUComputePipeline, x: GPUBuffer, g: GPUBuffer, b: GPUBuffer, y: GPUBuffer, rows: number): void {
    const [gx, gy] = split(Math.ceil(rows / 64));
    this.run(p, { 0: x, 1: g, 2: b, 4: y, 5: this.dims(rows) }, gx, gy);
  }

  /** y[n, out] (+)= act(x[n, in]·wᵀ + b); `b` is bound even when the pipeline has no bias. */
  linear(p: GPUComputePipeline, w: GPUBuffer, x: GPUBuffer, b: GPUBuffer, y: GPUBuffer, out: number, inDim: number, n: number): void {
    const [gy, gz] = split(Math.ceil(n / 4));
    this.run(p, { 0: w, 1: x, 2: b, 3: y, 4: this.dims(out, inDim, n) }, Math.ceil(out / 256), gy, gz);
  }

  attention(p: GPUComputePipeline, q: GPUBuffer, k: GPUBuffer, v: GPUBuffer, o: GPUBuffer, rows: number, heads: number, win: number, keys: number): void {
    const [gx, gz] = split(Math.ceil(rows / 64));
    this.run(p, { 0: q, 1: k, 2: v, 4: o, 5: this.dims(rows, win, keys) }, gx, heads, gz);
  }

  avgPool2(p: GPUComputePipeline, x: GPUBuffer, y: GPUBuffer, outRows: number, d: number): void {
    const [gx, gy] = split(Math.ceil((outRows * d) / 64));
    this.run(p, { 0: x, 4: y, 5: this.dims(outRows) }, gx, gy);
  }

  /** Releases the per-dispatch uniforms (after the pass's commands were submitted). */
  release(): void {
    for (const u of this.uniforms) this.ctx.destroy(u);
    this.uniforms.length = 0;
  }
}
