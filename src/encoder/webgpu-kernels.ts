/**
 * The encoder's kernels (shaders/encoder_*.wgsl, one kernel each) as typed ops: each names
 * its buffers, writes its Dims uniform and checks the sizes it is given; EncoderPass
 * records them into one compute pass. The kernels the WebGPU Whisper-family encoder
 * (./webgpu.ts) is built from, each checked against its TS reference in ./ops.ts by
 * e2e/encoder.spec.ts.
 */
import type { GpuContext } from '../gpu/device.js';
import { Op, record, type Binding, type Dispatch } from '../gpu/op.js';
import type { Constants, PipelineCache } from '../gpu/pipelines.js';
import { WEIGHT_FORMAT_ID, rowBytes, type WeightFormat } from '../model/quant.js';

export function encoderConstants(over: Constants): Constants {
  return {
    CIN: 4,
    COUT: 4,
    STRIDE: 1,
    POS: false,
    D: 4,
    EPS: { f32: 1e-5 },
    BIAS: false,
    GELU: false,
    ACC: false,
    WEIGHT_FORMAT: 0,
    HD: 1,
    SCALE: { f32: 1 },
    ...over,
  };
}

/** Splits `n` workgroups over x and a second axis, each at most 65535. */
export function split(n: number): [number, number] {
  return [Math.min(Math.max(n, 1), 65535), Math.max(1, Math.ceil(n / 65535))];
}

/** Records dispatches of the encoder kernels into one compute pass; owns their uniforms. */
export class EncoderPass {
  private readonly uniforms: GPUBuffer[] = [];
  constructor(
    private readonly ctx: GpuContext,
    readonly pass: GPUComputePassEncoder,
  ) {}

  /** A Dims uniform (a, b, c, d) for one dispatch, released with the pass. */
  dims(a: number, b = 0, c = 0, d = 0): GPUBuffer {
    const u = this.ctx.uniform('encoder dims', [a, b, c, d]);
    this.uniforms.push(u);
    return u;
  }

  add(d: Dispatch): void {
    record(this.pass, d);
  }

  /** Releases the per-dispatch uniforms (after the pass's commands were submitted). */
  release(): void {
    for (const u of this.uniforms) this.ctx.destroy(u);
    this.uniforms.length = 0;
  }
}

/**
 * The kernels that bind encoder_io.wgsl's list: inputs in0..in3 at 0..3, the output at 4,
 * the Dims at 5, each bound only where the kernel reads it.
 */
abstract class IoOp extends Op {
  protected io(ins: Binding[], dst: Binding, dims: GPUBuffer, x: number, y = 1, z = 1): Dispatch {
    const entries: Record<number, Binding> = { 4: dst, 5: dims };
    ins.forEach((b, i) => (entries[i] = b));
    return this.dispatch(entries, x, y, z);
  }
}

/** conv_k3 over a batch of windows: winIn input rows per window in, winOut rows out. */
export class Conv extends IoOp {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly cin: number,
    private readonly cout: number,
    private readonly pos: boolean,
  ) {
    super(ctx, pipeline, 'conv_k3');
  }

  record(
    pass: EncoderPass,
    b: { x: Binding; w: Binding; b: Binding; pos: Binding; y: Binding },
    p: { inRows: number; outRows: number; winIn: number; winOut: number },
  ): void {
    this.need('x', b.x, 4 * p.inRows * this.cin);
    this.need('w', b.w, 4 * 3 * this.cin * this.cout);
    this.need('b', b.b, 4 * this.cout);
    if (this.pos) this.need('pos', b.pos, 4 * p.winOut * this.cout);
    this.need('y', b.y, 4 * p.outRows * this.cout);
    const [gy, gz] = split(p.outRows);
    pass.add(
      this.io(
        [b.x, b.w, b.b, b.pos],
        b.y,
        pass.dims(p.inRows, p.outRows, p.winIn, p.winOut),
        Math.ceil(this.cout / 64),
        gy,
        gz,
      ),
    );
  }
}

/** LayerNorm with bias over rows of width d. */
export class LayerNorm extends IoOp {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly d: number,
  ) {
    super(ctx, pipeline, 'layer_norm');
  }

  record(pass: EncoderPass, b: { x: Binding; g: Binding; b: Binding; y: Binding }, rows: number): void {
    this.need('x', b.x, 4 * rows * this.d);
    this.need('g', b.g, 4 * this.d);
    this.need('b', b.b, 4 * this.d);
    this.need('y', b.y, 4 * rows * this.d);
    const [gx, gy] = split(Math.ceil(rows / 64));
    pass.add(this.io([b.x, b.g, b.b], b.y, pass.dims(rows), gx, gy));
  }
}

/** Windowed attention of rows [rows, d] per head: each row sees the first `keys` rows of its window. */
export class Attention extends IoOp {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly d: number,
  ) {
    super(ctx, pipeline, 'attention');
  }

  record(
    pass: EncoderPass,
    b: { q: Binding; k: Binding; v: Binding; out: Binding },
    p: { rows: number; heads: number; win: number; keys: number },
  ): void {
    for (const [what, buf] of [
      ['q', b.q],
      ['k', b.k],
      ['v', b.v],
      ['out', b.out],
    ] as const)
      this.need(what, buf, 4 * p.rows * this.d);
    const [gx, gz] = split(Math.ceil(p.rows / 64));
    pass.add(this.io([b.q, b.k, b.v], b.out, pass.dims(p.rows, p.win, p.keys), gx, p.heads, gz));
  }
}

/** AvgPool1d(2) over rows of width d: outRows rows from 2 outRows. */
export class AvgPool2 extends IoOp {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly d: number,
  ) {
    super(ctx, pipeline, 'avg_pool2');
  }

  record(pass: EncoderPass, b: { x: Binding; y: Binding }, outRows: number): void {
    this.need('x', b.x, 8 * outRows * this.d);
    this.need('y', b.y, 4 * outRows * this.d);
    const [gx, gy] = split(Math.ceil((outRows * this.d) / 64));
    pass.add(this.io([b.x], b.y, pass.dims(outRows), gx, gy));
  }
}

/** y[n, out] (+)= act(x[n, in]·wᵀ + b), W in its weight format (encoder_linear.wgsl's own bindings). */
export class Linear extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly format: WeightFormat,
  ) {
    super(ctx, pipeline, `linear ${format}`);
  }

  /** `b` is bound even when the pipeline has no bias. */
  record(
    pass: EncoderPass,
    b: { w: Binding; x: Binding; b: Binding; y: Binding },
    p: { out: number; inDim: number; n: number },
  ): void {
    this.need('w', b.w, p.out * rowBytes(this.format, p.inDim));
    this.need('x', b.x, 4 * p.n * p.inDim);
    this.need('y', b.y, 4 * p.n * p.out);
    const [gy, gz] = split(Math.ceil(p.n / 4));
    pass.add(this.dispatch([b.w, b.x, b.b, b.y, pass.dims(p.out, p.inDim, p.n)], Math.ceil(p.out / 256), gy, gz));
  }
}

/** The encoder's ops, their pipelines cached by the shared pipeline cache. */
export class EncoderKernels {
  private constructor(private readonly cache: PipelineCache) {}

  static create(cache: PipelineCache): EncoderKernels {
    return new EncoderKernels(cache);
  }

  async conv(cin: number, cout: number, stride: number, pos: boolean): Promise<Conv> {
    const p = await this.cache.get(
      'encoder_conv.wgsl',
      'conv_k3',
      encoderConstants({ CIN: cin, COUT: cout, STRIDE: stride, POS: pos }),
    );
    return new Conv(this.cache.ctx, p, cin, cout, pos);
  }

  async layerNorm(d: number, eps = 1e-5): Promise<LayerNorm> {
    return new LayerNorm(
      this.cache.ctx,
      await this.cache.get('encoder_layer_norm.wgsl', 'layer_norm', encoderConstants({ D: d, EPS: { f32: eps } })),
      d,
    );
  }

  async linear(bias: boolean, gelu: boolean, acc: boolean, format: WeightFormat = 'f32'): Promise<Linear> {
    const p = await this.cache.get(
      'encoder_linear.wgsl',
      'linear',
      encoderConstants({ BIAS: bias, GELU: gelu, ACC: acc, WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] }),
    );
    return new Linear(this.cache.ctx, p, format);
  }

  async attention(d: number, hd: number): Promise<Attention> {
    return new Attention(
      this.cache.ctx,
      await this.cache.get(
        'encoder_attention.wgsl',
        'attention',
        encoderConstants({ D: d, HD: hd, SCALE: { f32: 1 / Math.sqrt(hd) } }),
      ),
      d,
    );
  }

  async avgPool2(d: number): Promise<AvgPool2> {
    return new AvgPool2(
      this.cache.ctx,
      await this.cache.get('encoder_avg_pool.wgsl', 'avg_pool2', encoderConstants({ D: d })),
      d,
    );
  }
}
