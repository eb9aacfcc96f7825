/**
 * Decoder weights on the GPU, uploaded once. Q, K and V are concatenated into one
 * [QD + 2 KVD, D] matrix (one fused projection + RoPE + append kernel reads it), gate and
 * up into one [2 I, D] matrix (one matvec computes both and applies SwiGLU).
 */
import type { ModelConfig } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import type { GpuContext } from './device.js';

export interface GpuLayer {
  attnNorm: GPUBuffer;
  qkv: GPUBuffer;
  o: GPUBuffer;
  mlpNorm: GPUBuffer;
  gateUp: GPUBuffer;
  down: GPUBuffer;
}

function concat(...parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export class GpuWeights {
  private constructor(
    private readonly ctx: GpuContext,
    readonly embed: GPUBuffer,
    readonly layers: GpuLayer[],
    readonly norm: GPUBuffer,
    readonly lmHead: GPUBuffer,
    readonly bytes: number,
  ) {}

  static async upload(ctx: GpuContext, c: ModelConfig, w: DecoderWeights): Promise<GpuWeights> {
    let bytes = 0;
    const tensors: [string, Float32Array][] = [];
    const add = (name: string, data: Float32Array) => {
      const max = Math.min(ctx.limits.maxStorageBufferBindingSize, ctx.limits.maxBufferSize);
      if (data.byteLength > max) throw new RangeError(`weight ${name} (${data.byteLength} bytes) exceeds this GPU's storage binding limit (${max} bytes)`);
      bytes += data.byteLength;
      tensors.push([name, data]);
    };
    add('embed_tokens.weight', w.embed);
    w.layers.forEach((l, i) => {
      add(`layers.${i}.attn_norm.weight`, l.attnNorm);
      add(`layers.${i}.qkv`, concat(l.q, l.k, l.v));
      add(`layers.${i}.o_proj.weight`, l.o);
      add(`layers.${i}.mlp_norm.weight`, l.mlpNorm);
      add(`layers.${i}.gate_up`, concat(l.gate, l.up));
      add(`layers.${i}.down_proj.weight`, l.down);
    });
    add('norm.weight', w.norm);
    add('lm_head.weight', w.lmHead);
    const bufs = await ctx.allocating('decoder weights', bytes, () => tensors.map(([name, data]) => ctx.buffer(name, data.byteLength, undefined, data)));
    let i = 0;
    const embed = bufs[i++];
    const layers: GpuLayer[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      layers.push({ attnNorm: bufs[i++], qkv: bufs[i++], o: bufs[i++], mlpNorm: bufs[i++], gateUp: bufs[i++], down: bufs[i++] });
    }
    const norm = bufs[i++];
    const lmHead = bufs[i++];
    return new GpuWeights(ctx, embed, layers, norm, lmHead, bytes);
  }

  destroy(): void {
    this.ctx.destroy(this.embed);
    for (const l of this.layers) for (const b of Object.values(l)) this.ctx.destroy(b);
    this.ctx.destroy(this.norm);
    this.ctx.destroy(this.lmHead);
  }
}
