/**
 * The Whisper-family encoder on WebGPU: the same computation as ./whisper.ts (its
 * reference), with the kernels of shaders/encoder_*.wgsl. Windows are encoded in batches
 * of whole windows (sizing.ts `encodeBatch`: as many as its memory bound and at most
 * `maxBatchFrames` mel frames), so activation memory is bounded by the batch, not the
 * recording; every buffer but the weights is released when `encode`
 * returns, and `destroy` releases the weights before the decoder's prefill needs memory.
 * The Linear weights are stored in one of src/model/quant.ts's formats (f32, f16, q4);
 * convolutions, norms, biases and positions stay f32.
 */
import type { GpuContext } from '../gpu/device.js';
import type { PipelineCache } from '../gpu/pipelines.js';
import { ModelLoadError } from '../errors.js';
import { dequantize, pack, type WeightFormat } from '../model/quant.js';
import { DEFAULT_BATCH_FRAMES, encodeBatch, encoderLinears, linearFormat } from './sizing.js';
import {
  EncoderKernels,
  EncoderPass,
  type Attention,
  type AvgPool2,
  type Conv,
  type LayerNorm,
  type Linear,
} from './webgpu-kernels.js';
import { convWeightTimeMajor, sinusoids } from './ops.js';
import type { EncoderOutput, MelInput, TensorLookup } from './whisper.js';
import type { WhisperEncoderConfig, WhisperFamilySpec } from './whisper-config.js';

/**
 * `tensors` with every Linear weight replaced by the values the GPU encoder reads in
 * `format` (rounded to f16, or q4-quantised): the TS reference of a packed encoder.
 */
export function asStored(
  tensors: TensorLookup,
  config: WhisperEncoderConfig,
  spec: WhisperFamilySpec,
  format: WeightFormat,
): TensorLookup {
  const linears = new Map(
    encoderLinears(config, spec, (n, cols) => (tensors.get(n)?.length ?? 0) / cols).map((l) => [l.name, l]),
  );
  return {
    source: tensors.source,
    get(name: string): Float32Array | undefined {
      const v = tensors.get(name);
      const l = linears.get(name);
      if (!v || !l || l.rows * l.cols !== v.length) return v;
      return dequantize(pack(linearFormat(format, l.cols), v, l.rows, l.cols));
    },
  };
}

interface GpuLayer {
  ln1w: GPUBuffer;
  ln1b: GPUBuffer;
  qw: GPUBuffer;
  qb: GPUBuffer;
  kw: GPUBuffer;
  vw: GPUBuffer;
  vb: GPUBuffer;
  ow: GPUBuffer;
  ob: GPUBuffer;
  ln2w: GPUBuffer;
  ln2b: GPUBuffer;
  fc1w: GPUBuffer;
  fc1b: GPUBuffer;
  fc2w: GPUBuffer;
  fc2b: GPUBuffer;
}

/** How a recording is cut into batches of whole windows. */
interface BatchShape {
  /** Mel frames encoded. */
  n: number;
  /** Keys per window (Qwen2-Audio masks the padding frames), else Infinity. */
  keyLimit: number;
  /** Mel frames and encoder rows per window. */
  W: number;
  winOut: number;
  perBatch: number;
  buffers: [string, number][];
}

/** The activation buffers of one batch (sized for the largest). */
interface BatchBuffers {
  mel: GPUBuffer;
  conv1: GPUBuffer;
  h: GPUBuffer;
  a: GPUBuffer;
  q: GPUBuffer;
  k: GPUBuffer;
  v: GPUBuffer;
  o: GPUBuffer;
  big: GPUBuffer;
  big2: GPUBuffer;
}

interface LayerOps {
  conv1: Conv;
  conv2: Conv;
  norm: LayerNorm;
  pool: AvgPool2;
  attention: Attention;
  /** q and v (with bias), k (without), out_proj and fc2 (+= into the residual), fc1 (+ GELU). */
  qv: Linear;
  kProj: Linear;
  outProj: Linear;
  fc1: Linear;
  fc2: Linear;
}

type GpuPost =
  | { op: 'layernorm'; g: GPUBuffer; b: GPUBuffer }
  | { op: 'avgpool' }
  | { op: 'stack'; size: number }
  | { op: 'linear'; w: GPUBuffer; b: GPUBuffer | null; outDim: number; gelu: boolean; format: WeightFormat };

export class WebGpuWhisperEncoder {
  private readonly weights: GPUBuffer[] = [];
  private conv1!: GPUBuffer;
  private conv1b!: GPUBuffer;
  private conv2!: GPUBuffer;
  private conv2b!: GPUBuffer;
  private positions!: GPUBuffer;
  private zero!: GPUBuffer;
  private readonly layers: GpuLayer[] = [];
  private readonly post: GpuPost[] = [];
  /** Format of each packed Linear weight buffer (f32 where K does not fit the chosen format). */
  private readonly formats = new Map<GPUBuffer, WeightFormat>();
  readonly outputWidth: number;

  private constructor(
    private readonly ctx: GpuContext,
    private readonly kernels: EncoderKernels,
    readonly config: WhisperEncoderConfig,
    readonly spec: WhisperFamilySpec,
    tensors: TensorLookup,
    private readonly maxBatchFrames: number,
    readonly weightFormat: WeightFormat,
  ) {
    const { nMels, dModel: d, ffnDim: f, maxSourcePositions: P } = config;
    const up = (data: Float32Array, label: string) => {
      const b = ctx.buffer(label, data.byteLength, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, data);
      this.weights.push(b);
      return b;
    };
    const raw = (name: string, size: number) => {
      const v = tensors.get(name);
      if (!v) throw new ModelLoadError(tensors.source, 'tensor is missing', name);
      if (v.length !== size)
        throw new ModelLoadError(tensors.source, `holds ${v.length} values; the audio_config implies ${size}`, name);
      return v;
    };
    const need = (name: string, size: number) => up(raw(name, size), name);
    const linears = new Map(
      encoderLinears(config, spec, (n, cols) => (tensors.get(n)?.length ?? 0) / cols).map((l) => [l.name, l]),
    );
    /** A Linear weight in this encoder's format (f32 when its K does not fit the format). */
    const matrix = (name: string, size: number): { buf: GPUBuffer; format: WeightFormat } => {
      const l = linears.get(name)!;
      const v = raw(name, size);
      const format = linearFormat(weightFormat, l.cols);
      const m = pack(format, v, l.rows, l.cols);
      const b = ctx.buffer(name, m.data.byteLength, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, m.data);
      this.weights.push(b);
      return { buf: b, format };
    };
    const mat = (name: string, size: number) => {
      const m = matrix(name, size);
      this.formats.set(m.buf, m.format);
      return m.buf;
    };
    const p = spec.prefix;
    this.conv1 = up(convWeightTimeMajor(raw(`${p}conv1.weight`, d * nMels * 3), d, nMels), 'conv1');
    this.conv1b = need(`${p}conv1.bias`, d);
    this.conv2 = up(convWeightTimeMajor(raw(`${p}conv2.weight`, d * d * 3), d, d), 'conv2');
    this.conv2b = need(`${p}conv2.bias`, d);
    this.positions =
      spec.positions === 'stored' ? need(`${p}embed_positions.weight`, P * d) : up(sinusoids(P, d), 'sinusoids');
    this.zero = up(new Float32Array(4), 'zero');
    for (let i = 0; i < config.layers; i++) {
      const l = `${p}layers.${i}.`;
      this.layers.push({
        ln1w: need(l + 'self_attn_layer_norm.weight', d),
        ln1b: need(l + 'self_attn_layer_norm.bias', d),
        qw: mat(l + 'self_attn.q_proj.weight', d * d),
        qb: need(l + 'self_attn.q_proj.bias', d),
        kw: mat(l + 'self_attn.k_proj.weight', d * d),
        vw: mat(l + 'self_attn.v_proj.weight', d * d),
        vb: need(l + 'self_attn.v_proj.bias', d),
        ow: mat(l + 'self_attn.out_proj.weight', d * d),
        ob: need(l + 'self_attn.out_proj.bias', d),
        ln2w: need(l + 'final_layer_norm.weight', d),
        ln2b: need(l + 'final_layer_norm.bias', d),
        fc1w: mat(l + 'fc1.weight', f * d),
        fc1b: need(l + 'fc1.bias', f),
        fc2w: mat(l + 'fc2.weight', d * f),
        fc2b: need(l + 'fc2.bias', d),
      });
    }
    let width = d;
    spec.post.forEach((step, i) => {
      if (step.op === 'layernorm')
        this.post.push({ op: 'layernorm', g: need(`${step.name}.weight`, width), b: need(`${step.name}.bias`, width) });
      else if (step.op === 'avgpool') this.post.push({ op: 'avgpool' });
      else if (step.op === 'stack') {
        width *= step.size;
        this.post.push({ op: 'stack', size: step.size });
      } else if (step.op === 'linear') {
        const w = tensors.get(`${step.name}.weight`);
        if (!w || w.length % width !== 0)
          throw new ModelLoadError(
            tensors.source,
            w ? `not a multiple of the input width ${width}` : 'tensor is missing',
            `${step.name}.weight`,
          );
        const outDim = w.length / width;
        if (outDim % 4 !== 0 || width % 4 !== 0)
          throw new ModelLoadError(
            tensors.source,
            `projector shape [${outDim}, ${width}] is not a multiple of 4`,
            `${step.name}.weight`,
          );
        const b = step.bias ? need(`${step.name}.bias`, outDim) : null;
        const m = matrix(`${step.name}.weight`, w.length);
        this.post.push({ op: 'linear', w: m.buf, b, outDim, gelu: spec.post[i + 1]?.op === 'gelu', format: m.format });
        width = outDim;
      } else if (spec.post[i - 1]?.op !== 'linear') {
        throw new ModelLoadError(tensors.source, 'a GELU step must follow a linear step (it is fused into it)');
      }
    });
    this.outputWidth = width;
  }

  static async create(
    ctx: GpuContext,
    cache: PipelineCache,
    config: WhisperEncoderConfig,
    spec: WhisperFamilySpec,
    tensors: TensorLookup,
    opts: { maxBatchFrames?: number; weightFormat?: WeightFormat } = {},
  ): Promise<WebGpuWhisperEncoder> {
    const maxBatchFrames = Math.max(spec.windowFrames, opts.maxBatchFrames ?? DEFAULT_BATCH_FRAMES);
    if (config.dModel % 4 !== 0 || config.ffnDim % 4 !== 0)
      throw new ModelLoadError(
        tensors.source,
        `d_model ${config.dModel} and encoder_ffn_dim ${config.ffnDim} must be multiples of 4`,
      );
    return ctx.allocating(
      'audio encoder weights',
      0,
      () =>
        new WebGpuWhisperEncoder(
          ctx,
          EncoderKernels.create(cache),
          config,
          spec,
          tensors,
          maxBatchFrames,
          opts.weightFormat ?? 'f32',
        ),
    );
  }

  /** Releases the weights. */
  destroy(): void {
    for (const b of this.weights) this.ctx.destroy(b);
    this.weights.length = 0;
  }

  async encode(mel: MelInput): Promise<EncoderOutput> {
    const shape = this.batchShape(mel);
    const ops = await this.layerOps();
    const tmp: GPUBuffer[] = [];
    const buf = (label: string, floats: number) => {
      const b = this.ctx.buffer(
        label,
        floats * 4,
        GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      );
      tmp.push(b);
      return b;
    };
    const sized = new Map(shape.buffers);
    const [mel0, conv1, h, a, q, k, v, o, big, big2] = [
      'mel batch',
      'conv1 out',
      'hidden',
      'normed',
      'q',
      'k',
      'v',
      'attention out',
      'ffn',
      'post',
    ].map((l) => buf(l, sized.get(l)!));
    const bufs: BatchBuffers = { mel: mel0, conv1, h, a, q, k, v, o, big, big2 };
    const outs: Float32Array[] = [];
    let tokens = 0;
    try {
      for (let s0 = 0; s0 < shape.n; s0 += shape.perBatch) {
        const out = await this.encodeBatch(mel, s0, Math.min(shape.perBatch, shape.n - s0), shape, ops, bufs);
        outs.push(out.data);
        tokens += out.rows;
      }
    } finally {
      for (const b of tmp) this.ctx.destroy(b);
    }
    const data = new Float32Array(tokens * this.outputWidth);
    let off = 0;
    for (const x of outs) {
      data.set(x, off);
      off += x.length;
    }
    return { data, tokens, width: this.outputWidth };
  }

  /** Checks `mel` against the spec's windows and sizes the batches it is encoded in. */
  private batchShape(mel: MelInput): BatchShape {
    const { config: c, spec } = this;
    if (mel.nMels !== c.nMels)
      throw new RangeError(`features have ${mel.nMels} mel bins, the encoder expects ${c.nMels}`);
    const valid = Math.min(mel.validFrames, mel.frames);
    const n = spec.padding === 'drop' ? valid : mel.frames;
    if (n < 1) throw new RangeError('no mel frames to encode');
    if (spec.windows === 'exact' && n % spec.windowFrames !== 0)
      throw new RangeError(`${spec.family} encodes whole ${spec.windowFrames}-frame windows; got ${n} frames`);
    if (spec.padding === 'mask-keys' && n !== spec.windowFrames)
      throw new RangeError(`${spec.family} encodes one ${spec.windowFrames}-frame window per clip; got ${n} frames`);
    const keyLimit = spec.padding === 'mask-keys' ? Math.floor((valid - 1) / 2) + 1 : Infinity;
    const W = spec.windowFrames;
    const projector = this.post.flatMap((s) => (s.op === 'linear' ? [s.outDim] : []));
    const batch = encodeBatch(
      c,
      spec,
      this.outputWidth,
      projector,
      this.ctx.limits.maxStorageBufferBindingSize,
      this.maxBatchFrames,
    );
    return { n, keyLimit, W, winOut: Math.floor((W - 1) / 2) + 1, perBatch: batch.frames, buffers: batch.buffers };
  }

  /** The ops of the layers at d_model (the post steps at other widths ask for theirs as they go). */
  private async layerOps(): Promise<LayerOps> {
    const { config: c, kernels: K } = this;
    const d = c.dModel;
    // Layer Linears share one format (all have K = d_model or encoder_ffn_dim, multiples of 32 in practice).
    const lf = this.layers.length ? this.formats.get(this.layers[0].qw)! : 'f32';
    const [conv1, conv2, norm, qv, kProj, attention, outProj, fc1, pool] = await Promise.all([
      K.conv(c.nMels, d, 1, false),
      K.conv(d, d, 2, true),
      K.layerNorm(d),
      K.linear(true, false, false, lf),
      K.linear(false, false, false, lf),
      K.attention(d, d / c.heads),
      K.linear(true, false, true, lf),
      K.linear(true, true, false, lf),
      K.avgPool2(d),
    ]);
    const fc2 =
      this.layers.length && this.formats.get(this.layers[0].fc2w) !== lf
        ? await K.linear(true, false, true, this.formats.get(this.layers[0].fc2w))
        : outProj;
    const fc1f =
      this.layers.length && this.formats.get(this.layers[0].fc1w) !== lf
        ? await K.linear(true, true, false, this.formats.get(this.layers[0].fc1w))
        : fc1;
    return { conv1, conv2, norm, qv, kProj, attention, outProj, fc1: fc1f, fc2, pool };
  }

  /** Encodes `frames` mel frames from frame s0 (whole windows but the last): its encoder rows [rows, outputWidth]. */
  private async encodeBatch(
    mel: MelInput,
    s0: number,
    frames: number,
    shape: BatchShape,
    ops: LayerOps,
    b: BatchBuffers,
  ): Promise<{ data: Float32Array; rows: number }> {
    const { config: c, ctx } = this;
    const d = c.dModel;
    const { W, winOut } = shape;
    const tm = new Float32Array(frames * c.nMels);
    for (let m = 0; m < c.nMels; m++) {
      const row = m * mel.frames + s0;
      for (let t = 0; t < frames; t++) tm[t * c.nMels + m] = mel.data[row + t];
    }
    ctx.device.queue.writeBuffer(b.mel, 0, tm);
    const full = Math.floor(frames / W);
    const tail = frames - full * W;
    const encRows = full * winOut + (tail ? Math.floor((tail - 1) / 2) + 1 : 0);
    const rows = Math.min(encRows, shape.keyLimit);
    const enc = ctx.device.createCommandEncoder();
    const pass = new EncoderPass(ctx, enc.beginComputePass());
    ops.conv1.record(
      pass,
      { x: b.mel, w: this.conv1, b: this.conv1b, pos: this.zero, y: b.conv1 },
      { inRows: frames, outRows: frames, winIn: W, winOut: W },
    );
    ops.conv2.record(
      pass,
      { x: b.conv1, w: this.conv2, b: this.conv2b, pos: this.positions, y: b.h },
      { inRows: frames, outRows: encRows, winIn: W, winOut },
    );
    const keys = Math.min(winOut, shape.keyLimit);
    for (const L of this.layers) this.recordLayer(pass, ops, b, L, rows, keys, winOut);
    const { cur, rows: r, width } = await this.recordPost(pass, ops, b, rows);
    pass.pass.end();
    const bytes = r * width * 4;
    const staging = ctx.device.createBuffer({
      size: Math.max(16, Math.ceil(bytes / 16) * 16),
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    if (bytes > 0) enc.copyBufferToBuffer(cur, 0, staging, 0, Math.ceil(bytes / 4) * 4);
    ctx.device.queue.submit([enc.finish()]);
    pass.release();
    await staging.mapAsync(GPUMapMode.READ);
    const data = new Float32Array(staging.getMappedRange().slice(0, bytes));
    staging.unmap();
    staging.destroy();
    return { data, rows: r };
  }

  /** One pre-norm layer over `rows` rows: attention within windows of winOut rows (the first `keys` as keys), then the MLP. */
  private recordLayer(
    pass: EncoderPass,
    ops: LayerOps,
    b: BatchBuffers,
    L: GpuLayer,
    rows: number,
    keys: number,
    winOut: number,
  ): void {
    const { dModel: d, ffnDim, heads } = this.config;
    const dd = { out: d, inDim: d, n: rows };
    ops.norm.record(pass, { x: b.h, g: L.ln1w, b: L.ln1b, y: b.a }, rows);
    ops.qv.record(pass, { w: L.qw, x: b.a, b: L.qb, y: b.q }, dd);
    ops.kProj.record(pass, { w: L.kw, x: b.a, b: this.zero, y: b.k }, dd);
    ops.qv.record(pass, { w: L.vw, x: b.a, b: L.vb, y: b.v }, dd);
    ops.attention.record(pass, { q: b.q, k: b.k, v: b.v, out: b.o }, { rows, heads, win: winOut, keys });
    ops.outProj.record(pass, { w: L.ow, x: b.o, b: L.ob, y: b.h }, dd);
    ops.norm.record(pass, { x: b.h, g: L.ln2w, b: L.ln2b, y: b.a }, rows);
    ops.fc1.record(pass, { w: L.fc1w, x: b.a, b: L.fc1b, y: b.big }, { out: ffnDim, inDim: d, n: rows });
    ops.fc2.record(pass, { w: L.fc2w, x: b.big, b: L.fc2b, y: b.h }, { out: d, inDim: ffnDim, n: rows });
  }

  /** The post steps (norm, pooling, stacking, projector), ping-ponging between buffers: where [rows, width] ends up. */
  private async recordPost(
    pass: EncoderPass,
    ops: LayerOps,
    b: BatchBuffers,
    rows: number,
  ): Promise<{ cur: GPUBuffer; rows: number; width: number }> {
    const K = this.kernels;
    const d = this.config.dModel;
    let cur = b.h;
    let r = rows;
    let width = d;
    const other = (x: GPUBuffer) => (x === b.big2 ? b.big : b.big2);
    for (const st of this.post) {
      const dst = other(cur);
      if (st.op === 'layernorm')
        (width === d ? ops.norm : await K.layerNorm(width)).record(pass, { x: cur, g: st.g, b: st.b, y: dst }, r);
      else if (st.op === 'avgpool') {
        (width === d ? ops.pool : await K.avgPool2(width)).record(pass, { x: cur, y: dst }, r >> 1);
        r >>= 1;
      } else if (st.op === 'stack') {
        r = Math.floor(r / st.size);
        width *= st.size;
        continue;
      } else {
        (await K.linear(st.b !== null, st.gelu, false, st.format)).record(
          pass,
          { w: st.w, x: cur, b: st.b ?? this.zero, y: dst },
          { out: st.outDim, inDim: width, n: r },
        );
        width = st.outDim;
      }
      cur = dst;
    }
    return { cur, rows: r, width };
  }
}
