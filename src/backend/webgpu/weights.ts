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
 */
import type { ModelConfig } from '../../model/config.js';
import { packedWeightBytes, type PackedDecoderWeights, type WeightBytes } from '../../model/packed-weights.js';
import type { PackedMatrix } from '../../model/quant.js';
import { ModelTooBigError } from '../../errors.js';
import { matrixBindingProblem } from './fit.js';
import type { GpuContext } from '../../gpu/device.js';
import { destroyMatrix, uploadMatrix, type GpuMatrix } from './weight-formats.js';
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
    w: PackedDecoderWeights,
    maxBindingBytes: number,
    kernels: WeightKernelsOf | Promise<WeightKernelsOf>,
    onUpload?: (loaded: number, total: number) => void,
  ): Promise<GpuWeights> {
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
      const vector = async (name: string, data: Float32Array, weight = true) => {
        const b = await ctx.allocating(name, data.byteLength, () => ctx.buffer(name, data.byteLength, undefined, data));
        vectors.push(b);
        if (weight) onUpload?.((loaded += data.byteLength), total);
        return b;
      };
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
      const noBias = await vector('no_bias', new Float32Array(4), false);
      return new GpuWeights(ctx, embed, layers, norm, lmHead, packedWeightBytes(w), noBias, await kernels);
    } catch (e) {
      for (const m of made) destroyMatrix(ctx, m);
      for (const b of vectors) ctx.destroy(b);
      throw e;
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
