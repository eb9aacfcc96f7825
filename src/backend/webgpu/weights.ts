/**
 * Decoder weights on the GPU, uploaded once, every matrix in its weight format
 * (src/model/packed-weights.ts): Q, K and V as one [QD + 2 KVD, D] matrix (one fused
 * projection + RoPE + append kernel reads it), gate and up as one [2 I, D] matrix (one
 * matvec computes both and applies SwiGLU), the q/k/v biases of the Qwen2 family as one
 * f32 [QD + 2 KVD] vector in Wqkv's row order.
 *
 * The embedding table and the lm_head (131,072 × 3,072 for Voxtral: 226 MB in q4, 805 MB
 * in f16) are split by rows into parts no larger than one storage binding; the embedding
 * gather and the head's matvec run one dispatch per part. A tied head is the embedding's
 * own parts. Layer matrices are read whole by their kernels (fused SwiGLU reads a row of
 * gate and of up, the QKV kernel a row per head lane), so each must fit one binding.
 *
 * Weights come either in memory (packed at load) or as a source of byte ranges in files
 * (src/model/packed-source.ts): then each buffer is made at its final size and the ranges
 * are streamed into it with `queue.writeBuffer` a few MiB at a time, so the page never holds
 * the weights, and keeps nothing of them once uploaded.
 */
import type { ModelConfig } from '../../model/config.js';
import { packedWeightBytes, type PackedDecoderWeights, type WeightBytes } from '../../model/packed-weights.js';
import type { PackedMatrix, WeightFormat } from '../../model/quant.js';
import { CancelledError, ModelTooBigError } from '../../errors.js';
import { matrixBindingProblem } from './fit.js';
import type { GpuContext } from '../../gpu/device.js';
import { destroyMatrix, uploadMatrix, type GpuMatrix, type GpuMatrixPart } from './weight-formats.js';
import {
  isPackedSource,
  sourceWeightBytes,
  streamMatrix,
  streamedMatrixBytes,
  type PackedWeightSource,
  type StreamedMatrix,
} from '../../model/packed-source.js';
import { rowBytes, splitRows } from '../../model/quant.js';
import type { StreamOptions } from '../../model/stream-range.js';
import type { WeightKernelsOf } from './weight-kernels.js';

export interface GpuLayer {
  attnNorm: GPUBuffer;
  qkv: GpuMatrix;
  /** q/k/v biases [QD + 2 KVD], only when config.attentionBias. */
  qkvBias?: GPUBuffer;
  o: GpuMatrix;
  mlpNorm: GPUBuffer;
  gateUp: GpuMatrix;
  down: GpuMatrix;
}

export class GpuWeights {
  private constructor(
    private readonly ctx: GpuContext,
    readonly embed: GpuMatrix,
    readonly layers: GpuLayer[],
    readonly norm: GPUBuffer,
    readonly lmHead: GpuMatrix,
    /** Bytes on the device, in total and per storage format. */
    readonly memory: WeightBytes,
    /** Bound in place of a bias a model does not have (the kernels never read it then). */
    private readonly noBias: GPUBuffer,
    /** The pipelines that read a matrix of each format these weights use. */
    readonly kernels: WeightKernelsOf,
  ) {}

  get bytes(): number {
    return this.memory.total;
  }

  /** The layer's q/k/v bias buffer, or the placeholder for models without biases. */
  qkvBias(layer: number): GPUBuffer {
    return this.layers[layer].qkvBias ?? this.noBias;
  }

  /**
   * Uploads packed weights; `maxBindingBytes` is one storage binding's limit (the
   * device's, or a lower cap). Every size is checked before the first buffer is made.
   * `kernels` has the pipelines of every format in packedFormats(w).
   */
  static async upload(
    ctx: GpuContext,
    c: ModelConfig,
    w: PackedDecoderWeights | PackedWeightSource,
    maxBindingBytes: number,
    kernels: WeightKernelsOf | Promise<WeightKernelsOf>,
    onUpload?: (loaded: number, total: number) => void,
    stream: StreamOptions = {},
  ): Promise<GpuWeights> {
    if (isPackedSource(w)) return GpuWeights.uploadStreamed(ctx, c, w, maxBindingBytes, kernels, onUpload, stream);
    checkBindings(c, w, maxBindingBytes);
    const made: GpuMatrix[] = [];
    const vectors: GPUBuffer[] = [];
    const total = packedWeightBytes(w).total;
    let loaded = 0;
    onUpload?.(0, total);
    try {
      const matrix = async (name: string, m: PackedMatrix) => {
        const g = await uploadMatrix(ctx, name, m, maxBindingBytes);
        made.push(g);
        onUpload?.((loaded += g.bytes), total);
        return g;
      };
      const vector = async (name: string, data: Float32Array) => {
        const b = await ctx.allocating(name, data.byteLength, () => ctx.buffer(name, data.byteLength, undefined, data));
        vectors.push(b);
        onUpload?.((loaded += data.byteLength), total);
        return b;
      };
      const { embed, layers, norm, lmHead } = await placeDecoder(w, matrix, vector);
      const noBias = await ctx.allocating('no_bias', 16, () =>
        ctx.buffer('no_bias', 16, undefined, new Float32Array(4)),
      );
      vectors.push(noBias);
      return new GpuWeights(ctx, embed, layers, norm, lmHead, packedWeightBytes(w), noBias, await kernels);
    } catch (e) {
      for (const m of made) destroyMatrix(ctx, m);
      for (const b of vectors) ctx.destroy(b);
      throw e;
    }
  }

  /** `upload` from a source: every buffer at its final size, filled piece by piece as its ranges stream in. */
  private static async uploadStreamed(
    ctx: GpuContext,
    c: ModelConfig,
    w: PackedWeightSource,
    maxBindingBytes: number,
    kernels: WeightKernelsOf | Promise<WeightKernelsOf>,
    onUpload: ((loaded: number, total: number) => void) | undefined,
    stream: StreamOptions,
  ): Promise<GpuWeights> {
    checkBindings(c, w, maxBindingBytes);
    const made: GpuMatrix[] = [];
    const vectors: GPUBuffer[] = [];
    const memory = sourceWeightBytes(w);
    const total = memory.total;
    let loaded = 0;
    const writer = new QueueWriter(ctx.device.queue);
    onUpload?.(0, total);
    try {
      const fill = async (m: StreamedMatrix, parts: GpuMatrixPart[]) => {
        const per = rowBytes(m.format, m.cols);
        await streamMatrix(
          m,
          async (piece, at) => {
            for (const p of parts) {
              const [p0, p1] = [p.row0 * per, (p.row0 + p.rows) * per];
              const from = Math.max(at, p0);
              const to = Math.min(at + piece.byteLength, p1);
              if (to > from) writer.write(p.buffer, from - p0, piece, from - at, to - from);
            }
            await writer.settle();
            onUpload?.((loaded += piece.byteLength), total);
          },
          stream,
        );
      };
      const matrix = async (name: string, m: StreamedMatrix) => {
        const plan = splitRows(m.format, m.rows, m.cols, maxBindingBytes);
        const bytes = streamedMatrixBytes(m);
        const parts: GpuMatrixPart[] = [];
        const g: GpuMatrix = { name, format: m.format, rows: m.rows, cols: m.cols, parts, bytes };
        made.push(g);
        await ctx.allocating(name, bytes, () => {
          plan.forEach((p, i) => {
            const label = plan.length > 1 ? `${name}[${i}]` : name;
            const size = p.rows * rowBytes(m.format, m.cols);
            parts.push({ ...p, buffer: ctx.buffer(label, size, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST) });
          });
        });
        await fill(m, parts);
        return g;
      };
      const vector = async (name: string, m: StreamedMatrix) => {
        const bytes = streamedMatrixBytes(m);
        const b = await ctx.allocating(name, bytes, () => ctx.buffer(name, bytes));
        vectors.push(b);
        await fill(m, [{ row0: 0, rows: 1, buffer: b }]);
        return b;
      };
      const { embed, layers, norm, lmHead } = await placeDecoder(w, matrix, vector);
      const noBias = await ctx.allocating('no_bias', 16, () =>
        ctx.buffer('no_bias', 16, undefined, new Float32Array(4)),
      );
      vectors.push(noBias);
      await writer.drain();
      return new GpuWeights(ctx, embed, layers, norm, lmHead, memory, noBias, await kernels);
    } catch (e) {
      for (const m of made) destroyMatrix(ctx, m);
      for (const b of vectors) ctx.destroy(b);
      // A download stopped by the signal is the upload's cancel.
      throw e instanceof CancelledError && !e.phase ? new CancelledError('', 'upload') : e;
    }
  }

  destroy(): void {
    destroyMatrix(this.ctx, this.embed);
    for (const l of this.layers) {
      for (const m of [l.qkv, l.o, l.gateUp, l.down]) destroyMatrix(this.ctx, m);
      this.ctx.destroy(l.attnNorm);
      this.ctx.destroy(l.mlpNorm);
      this.ctx.destroy(l.qkvBias);
    }
    this.ctx.destroy(this.norm);
    if (this.lmHead !== this.embed) destroyMatrix(this.ctx, this.lmHead);
    this.ctx.destroy(this.noBias);
  }
}

/**
 * `queue.writeBuffer` with the bytes in flight bounded: each write copies its piece into
 * staging memory the device consumes later, so after every WINDOW bytes the writer waits for
 * the queue to take them, lest the staging of gigabytes pile up before the device catches up.
 */
class QueueWriter {
  static readonly WINDOW = 64 << 20;
  private pending = 0;

  constructor(private readonly queue: GPUQueue) {}

  write(buffer: GPUBuffer, offset: number, data: Uint8Array<ArrayBuffer>, dataOffset: number, size: number): void {
    this.queue.writeBuffer(buffer, offset, data, dataOffset, size);
    this.pending += size;
  }

  async settle(): Promise<void> {
    if (this.pending >= QueueWriter.WINDOW) await this.drain();
  }

  async drain(): Promise<void> {
    this.pending = 0;
    await this.queue.onSubmittedWorkDone();
  }
}

/** A decoder's tensors by role, whatever holds them (packed in memory, or a source to stream). */
interface DecoderOf<M, V> {
  embed: M;
  layers: readonly {
    attnNorm: V;
    qkv: M;
    qkvBias?: V;
    o: M;
    mlpNorm: V;
    gateUp: M;
    down: M;
  }[];
  norm: V;
  lmHead: M;
}

/** Every layer's matrices against one binding's limit, before the first buffer is made. */
function checkBindings(
  c: ModelConfig,
  w: DecoderOf<{ format: WeightFormat; rows: number; cols: number }, unknown>,
  maxBindingBytes: number,
): void {
  const limits = { maxStorageBufferBindingSize: maxBindingBytes, maxBufferSize: maxBindingBytes };
  w.layers.forEach((l, i) => {
    if (c.attentionBias && !l.qkvBias)
      throw new RangeError(`layer ${i}: the config says q/k/v biases but the weights have none`);
    for (const [name, m] of [
      ['qkv', l.qkv],
      ['o_proj', l.o],
      ['gate_up', l.gateUp],
      ['down_proj', l.down],
    ] as const) {
      const p = matrixBindingProblem(`layers.${i}.${name}`, m.format, m.rows, m.cols, limits);
      if (p) throw new ModelTooBigError([p], `the decoder of ${c.name}`);
    }
  });
}

/** The decoder's buffers in upload order, made by `matrix` and `vector` from whatever holds them; a tied head is the embedding's. */
async function placeDecoder<M, V>(
  w: DecoderOf<M, V>,
  matrix: (name: string, m: M) => Promise<GpuMatrix>,
  vector: (name: string, v: V) => Promise<GPUBuffer>,
): Promise<{ embed: GpuMatrix; layers: GpuLayer[]; norm: GPUBuffer; lmHead: GpuMatrix }> {
  const embed = await matrix('embed_tokens.weight', w.embed);
  const layers: GpuLayer[] = [];
  for (let i = 0; i < w.layers.length; i++) {
    const l = w.layers[i];
    const p = `layers.${i}.`;
    layers.push({
      attnNorm: await vector(p + 'attn_norm.weight', l.attnNorm),
      qkv: await matrix(p + 'qkv', l.qkv),
      ...(l.qkvBias ? { qkvBias: await vector(p + 'qkv_bias', l.qkvBias) } : {}),
      o: await matrix(p + 'o_proj.weight', l.o),
      mlpNorm: await vector(p + 'mlp_norm.weight', l.mlpNorm),
      gateUp: await matrix(p + 'gate_up', l.gateUp),
      down: await matrix(p + 'down_proj.weight', l.down),
    });
  }
  const norm = await vector('norm.weight', w.norm);
  const lmHead = w.lmHead === w.embed ? embed : await matrix('lm_head.weight', w.lmHead);
  return { embed, layers, norm, lmHead };
}
