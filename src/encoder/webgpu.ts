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
import { EncoderKernels, EncoderPass } from './webgpu-kernels.js';
import { convWeightTimeMajor, sinusoids } from './ops.js';
import type { EncoderOutput, MelInput, TensorLookup } from './whisper.js';
import type { WhisperEncoderConfig, WhisperFamilySpec } from './whisper-config.js';


/**
 * `tensors` with every Linear weight replaced by the values the GPU encoder reads in
 * `format` (rounded to f16, or q4-quantised): the TS reference of a packed encoder.
 */
export function asStored(tensors: TensorLookup, config: WhisperEncoderConfig, spec: WhisperFamilySpec, format: WeightFormat): TensorLookup {
  const linears = new Map(encoderLinears(config, spec, (n, cols) => (tensors.get(n)?.length ?? 0) / cols).map((l) => [l.name, l]));
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
  ln1w: GPUBuffer; ln1b: GPUBuffer; qw: GPUBuffer; qb: GPUBuffer; kw: GPUBuffer; vw: GPUBuffer; vb: GPUBuffer;
  ow: GPUBuffer; ob: GPUBuffer; ln2w: GPUBuffer; ln2b: GPUBuffer; fc1w: GPUBuffer; fc1b: GPUBuffer; fc2w: GPUBuffer; fc2b: GPUBuffer;
}

type GpuPost =
  | { op: 'layernorm'; g: GPUBuffer; b: GPUBuffer }
  | { op: 'avgpool' }
  | { op: 'stack'; size: number }
  | { op: 'linear'; w: GPUBuffer; b: GPUBuffer | null; outDim: number; gelu: boolean; format: WeightFormat };

export class WebGpuWhisperEncoder {
  private readonly weights: GPUBuffer[] = [];
  private conv1!: GPUBuffer; private conv1b!: GPUBuffer; private conv2!: GPUBuffer; private conv2b!: GPUBuffer;
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
      if (v.length !== size) throw new ModelLoadError(tensors.source, `holds ${v.length} values; the audio_config implies ${size}`, name);
      return v;
    };
    const need = (name: string, size: number) => up(raw(name, size), name);
    const linears = new Map(encoderLinears(config, spec, (n, cols) => (tensors.get(n)?.length ?? 0) / cols).map((l) => [l.name, l]));
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
    this.positions = spec.positions === 'stored' ? need(`${p}embed_positions.weight`, P * d) : up(sinusoids(P, d), 'sinusoids');
    this.zero = up(new Float32Array(4), 'zero');
    for (let i = 0; i < config.layers; i++) {
      const l = `${p}layers.${i}.`;
      this.layers.push({
        ln1w: need(l + 'self_attn_layer_norm.weight', d), ln1b: need(l + 'self_attn_layer_norm.bias', d),
        qw: mat(l + 'self_attn.q_proj.weight', d * d), qb: need(l + 'self_attn.q_proj.bias', d),
        kw: mat(l + 'self_attn.k_proj.weight', d * d),
        vw: mat(l + 'self_attn.v_proj.weight', d * d), vb: need(l + 'self_attn.v_proj.bias', d),
        ow: mat(l + 'self_attn.out_proj.weight', d * d), ob: need(l + 'self_attn.out_proj.bias', d),
        ln2w: need(l + 'final_layer_norm.weight', d), ln2b: need(l + 'final_layer_norm.bias', d),
        fc1w: mat(l + 'fc1.weight', f * d), fc1b: need(l + 'fc1.bias', f),
        fc2w: mat(l + 'fc2.weight', d * f), fc2b: need(l + 'fc2.bias', d),
      });
    }
    let width = d;
    spec.post.forEach((step, i) => {
      if (step.op === 'layernorm') this.post.push({ op: 'layernorm', g: need(`${step.name}.weight`, width), b: need(`${step.name}.bias`, width) });
      else if (step.op === 'avgpool') this.post.push({ op: 'avgpool' });
      else if (step.op === 'stack') {
        width *= step.size;
        this.post.push({ op: 'stack', size: step.size });
      } else if (step.op === 'linear') {
        const w = tensors.get(`${step.name}.weight`);
        if (!w || w.length % width !== 0) throw new ModelLoadError(tensors.source, w ? `not a multiple of the input width ${width}` : 'tensor is missing', `${step.name}.weight`);
        const outDim = w.length / width;
        if (outDim % 4 !== 0 || width % 4 !== 0) throw new ModelLoadError(tensors.source, `projector shape [${outDim}, ${width}] is not a multiple of 4`, `${step.name}.weight`);
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
    ctx: GpuContext, cache: PipelineCache, config: WhisperEncoderConfig, spec: WhisperFamilySpec, tensors: TensorLookup,
    opts: { maxBatchFrames?: number; weightFormat?: WeightFormat } = {},
  ): Promise<WebGpuWhisperEncoder> {
    const maxBatchFrames = Math.max(spec.windowFrames, opts.maxBatchFrames ?? DEFAULT_BATCH_FRAMES);
    if (config.dModel % 4 !== 0 || config.ffnDim % 4 !== 0) throw new ModelLoadError(tensors.source, `d_model ${config.dModel} and encoder_ffn_dim ${config.ffnDim} must be multiples of 4`);
    return ctx.allocating('audio encoder weights', 0, () => new WebGpuWhisperEncoder(ctx, EncoderKernels.create(cache), config, spec, tensors, maxBatchFrames, opts.weightFormat ?? 'f32'));
  }

  /** Releases the weights. */
  destroy(): void {
    for (const b of this.weights) this.ctx.destroy(b);
    this.weights.length = 0;
  }

  async encode(mel: MelInput): Promise<EncoderOutput> {
    const { config: c, spec, ctx, kernels: K } = this;
    const d = c.dModel;
    const hd = d / c.heads;
    if (mel.nMels !== c.nMels) throw new RangeError(`features have ${mel.nMels} mel bins, the encoder expects ${c.nMels}`);
    const valid = Math.min(mel.validFrames, mel.frames);
    const n = spec.padding === 'drop' ? valid : mel.frames;
    if (n < 1) throw new RangeError('no mel frames to encode');
    if (spec.windows === 'exact' && n % spec.windowFrames !== 0) throw new RangeError(`${spec.family} encodes whole ${spec.windowFrames}-frame windows; got ${n} frames`);
    if (spec.padding === 'mask-keys' && n !== spec.windowFrames) throw new RangeError(`${spec.family} encodes one ${spec.windowFrames}-frame window per clip; got ${n} frames`);
    const keyLimit = spec.padding === 'mask-keys' ? Math.floor((valid - 1) / 2) + 1 : Infinity;
    const W = spec.windowFrames;
    const winOut = Math.floor((W - 1) / 2) + 1;
    const projector = this.post.flatMap((s) => (s.op === 'linear' ? [s.outDim] : []));
    const batch = encodeBatch(c, spec, this.outputWidth, projector, ctx.limits.maxStorageBufferBindingSize, this.maxBatchFrames);
    const perBatch = batch.frames;
    // Layer Linears share one format (all have K = d_model or encoder_ffn_dim, multiples of 32 in practice).
    const lf = this.layers.length ? this.formats.get(this.layers[0].qw)! : 'f32';
    const [p1, p2, ln, qP, kP, att, accP, fc1P, pool] = await Promise.all([
      K.conv(c.nMels, d, 1, false), K.conv(d, d, 2, true), K.layerNorm(d), K.linear(true, false, false, lf), K.linear(false, false, false, lf),
      K.attention(d, hd), K.linear(true, false, true, lf), K.linear(true, true, false, lf), K.avgPool2(d),
    ]);
    const fc2P = this.layers.length && this.formats.get(this.layers[0].fc2w) !== lf ? await K.linear(true, false, true, this.formats.get(this.layers[0].fc2w)) : accP;
    const fc1Pf = this.layers.length && this.formats.get(this.layers[0].fc1w) !== lf ? await K.linear(true, true, false, this.formats.get(this.layers[0].fc1w)) : fc1P;
    const tmp: GPUBuffer[] = [];
    const buf = (label: string, floats: number) => {
      const b = ctx.buffer(label, floats * 4, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC);
      tmp.push(b);
      return b;
    };
    const sized = new Map(batch.buffers);
    const [melBuf, x1, h, a, q, k, v, o, big, big2] = ['mel batch', 'conv1 out', 'hidden', 'normed', 'q', 'k', 'v', 'attention out', 'ffn', 'post'].map((l) => buf(l, sized.get(l)!));
    const outs: Float32Array[] = [];
    let tokens = 0;
    try {
      for (let s0 = 0; s0 < n; s0 += perBatch) {
        const frames = Math.min(perBatch, n - s0);
        const tm = new Float32Array(frames * c.nMels);
        for (let m = 0; m < c.nMels; m++) {
          const row = m * mel.frames + s0;
          for (let t = 0; t < frames; t++) tm[t * c.nMels + m] = mel.data[row + t];
        }
        ctx.device.queue.writeBuffer(melBuf, 0, tm);
        const full = Math.floor(frames / W);
        const tail = frames - full * W;
        const encRows = full * winOut + (tail ? Math.floor((tail - 1) / 2) + 1 : 0);
        const rows = Math.min(encRows, keyLimit);
        const enc = ctx.device.createCommandEncoder();
        const pass = new EncoderPass(ctx, enc.beginComputePass());
        pass.conv(p1, melBuf, this.conv1, this.conv1b, this.zero, x1, d, frames, frames, W, W);
        pass.conv(p2, x1, this.conv2, this.conv2b, this.positions, h, d, frames, encRows, W, winOut);
        const keys = Math.min(winOut, keyLimit);
        for (const L of this.layers) {
          pass.layerNorm(ln, h, L.ln1w, L.ln1b, a, rows);
          pass.linear(qP, L.qw, a, L.qb, q, d, d, rows);
          pass.linear(kP, L.kw, a, this.zero, k, d, d, rows);
          pass.linear(qP, L.vw, a, L.vb, v, d, d, rows);
          pass.attention(att, q, k, v, o, rows, c.heads, winOut, keys);
          pass.linear(accP, L.ow, o, L.ob, h, d, d, rows);
          pass.layerNorm(ln, h, L.ln2w, L.ln2b, a, rows);
          pass.linear(fc1Pf, L.fc1w, a, L.fc1b, big, c.ffnDim, d, rows);
          pass.linear(fc2P, L.fc2w, big, L.fc2b, h, d, c.ffnDim, rows);
        }
        // Post steps ping-pong between buffers; `cur` holds [r, width].
        let cur = h;
        let r = rows;
        let width = d;
        const other = (b: GPUBuffer) => (b === big2 ? big : big2);
        for (const st of this.post) {
          const dst = other(cur);
          if (st.op === 'layernorm') pass.layerNorm(width === d ? ln : await K.layerNorm(width), cur, st.g, st.b, dst, r);
          else if (st.op === 'avgpool') {
            pass.avgPool2(width === d ? pool : await K.avgPool2(width), cur, dst, r >> 1, width);
            r >>= 1;
          } else if (st.op === 'stack') {
            r = Math.floor(r / st.size);
            width *= st.size;
            continue;
          } else {
            pass.linear(await K.linear(st.b !== null, st.gelu, false, st.format), st.w, cur, st.b ?? this.zero, dst, st.outDim, width, r);
            width = st.outDim;
          }
          cur = dst;
        }
        pass.pass.end();
        const bytes = r * width * 4;
        const staging = ctx.device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
        if (bytes > 0) enc.copyBufferToBuffer(cur, 0, staging, 0, Math.ceil(bytes / 4) * 4);
        ctx.device.queue.submit([enc.finish()]);
        pass.release();
        await staging.mapAsync(GPUMapMode.READ);
        outs.push(new Float32Array(staging.getMappedRange().slice(0, bytes)));
        staging.unmap();
        staging.destroy();
        tokens += r;
      }
    } finally {
      for (const b of tmp) ctx.destroy(b);
    }
    const data = new Float32Array(tokens * this.outputWidth);
    let off = 0;
    for (const x of outs) {
      data.set(x, off);
      off += x.length;
    }
    return { data, tokens, width: this.outputWidth };
  }
}
