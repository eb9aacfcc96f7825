/**
 * The kernel catalogue: every pipeline the decoder runs, specialised by constants from
 * the model config and the pool's page size, compiled once per (config, page size).
 * Both the backend and the kernel tests dispatch through these.
 */
import type { KvPrecision } from '../../kv/precision.js';
import { groupSize, type ModelConfig } from '../../model/config.js';
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';

/** Largest workgroup count of one grid dimension WebGPU guarantees. */
export const MAX_GROUPS = 65535;

/** A 1-D workgroup count as a 2-D grid (the kernels linearise wid.x + wid.y * nwg.x). */
export function grid(groups: number): [number, number] {
  if (groups <= MAX_GROUPS) return [Math.max(1, groups), 1];
  const y = Math.ceil(groups / MAX_GROUPS);
  return [Math.ceil(groups / y), y];
}

/** Workgroups of a decode matvec: 64 rows each. */
export function matvecGroups(rows: number): [number, number] {
  return grid(Math.ceil(rows / 64));
}

/** Workgroups of the prefill matmul: 32x32 output tiles. */
export function matmulGroups(rows: number, n: number): [number, number] {
  return [Math.ceil(rows / 32), Math.ceil(n / 32)];
}

/**
 * Pages per split-K workgroup: about 256 slots, so a long head is spread over many
 * workgroups while one workgroup's scores stay small in workgroup memory.
 */
export function pagesPerSplit(pageSize: number): number {
  return Math.max(1, Math.floor(256 / pageSize));
}

export function modelConstants(c: ModelConfig, pageSize: number, precision: KvPrecision = 'f32'): Constants {
  const hd = c.headDim;
  return {
    // The pool's element type (kv/precision.ts): f16 pairs packed in u32 words, or f32 bits.
    KV_F16: precision === 'f16',
    // q/k/v biases (Qwen2 family): qkv_rope adds them before RoPE.
    HAS_BIAS: c.attentionBias,
    // The weight format the embedding, Wqkv and the dense products read (src/model/quant.ts):
    // 0 f32 here; the backend specialises other formats' pipelines from these constants.
    WEIGHT_FORMAT: 0,
    D: c.hiddenSize,
    INTER: c.intermediateSize,
    VOCAB: c.vocabSize,
    H: c.numHeads,
    HKV: c.numKvHeads,
    HD: hd,
    HALF: hd / 2,
    GROUP: groupSize(c),
    QD: c.numHeads * hd,
    KVD: c.numKvHeads * hd,
    PAGE: pageSize,
    PPS: pagesPerSplit(pageSize),
    // Key blocks of prefill attention: 8 KiB of workgroup memory for K and V together.
    BK: Math.max(1, Math.floor(1024 / hd)),
    EPS: { f32: c.rmsNormEps },
    SCALE: { f32: 1 / Math.sqrt(hd) },
  };
}

export class Kernels {
  private constructor(
    readonly constants: Constants,
    readonly pageSize: number,
    readonly embed: GPUComputePipeline,
    readonly rmsnorm: GPUComputePipeline,
    readonly matvec: GPUComputePipeline,
    readonly matvecAdd: GPUComputePipeline,
    readonly matvecSwiglu: GPUComputePipeline,
    readonly matmul: GPUComputePipeline,
    readonly matmulAdd: GPUComputePipeline,
    readonly swiglu: GPUComputePipeline,
    readonly argmax: GPUComputePipeline,
    readonly qkvRopeAppend: GPUComputePipeline,
    readonly ropeSplit: GPUComputePipeline,
    readonly gather: GPUComputePipeline,
    readonly attnSplit: GPUComputePipeline,
    readonly attnReduce: GPUComputePipeline,
    readonly attnExport: GPUComputePipeline,
    readonly causalAttention: GPUComputePipeline,
    readonly prefillScores: GPUComputePipeline,
  ) {}

  get pagesPerSplit(): number {
    return this.constants.PPS as number;
  }

  static async load(cache: PipelineCache, c: ModelConfig, pageSize: number, onCompile?: (fraction: number) => void, precision: KvPrecision = 'f32'): Promise<Kernels> {
    // The matmuls and attention read vec4 rows of every weight, activation and head.
    for (const [name, v] of [['hidden_size', c.hiddenSize], ['intermediate_size', c.intermediateSize], ['num_heads * head_dim', c.numHeads * c.headDim], ['head_dim', c.headDim]] as const) {
      if (v % 4 !== 0) throw new RangeError(`the WebGPU kernels need ${name} (${v}) to be a multiple of 4`);
    }
    const k = modelConstants(c, pageSize, precision);
    // The f32 weight format of the reference model (src/model/quant.ts, WEIGHT_FORMAT 0).
    const acc = (on: boolean): Constants => ({ ...k, ACC: on, WEIGHT_FORMAT: 0 });
    let done = 0;
    const list: Promise<GPUComputePipeline>[] = [
      cache.get('embed.wgsl', 'embed', k),
      cache.get('rmsnorm.wgsl', 'rmsnorm', k),
      cache.get('matvec.wgsl', 'matvec', acc(false)),
      cache.get('matvec.wgsl', 'matvec', acc(true)),
      cache.get('matvec.wgsl', 'matvec_swiglu', acc(false)),
      cache.get('matmul.wgsl', 'matmul', acc(false)),
      cache.get('matmul.wgsl', 'matmul', acc(true)),
      cache.get('swiglu.wgsl', 'swiglu', k),
      cache.get('argmax.wgsl', 'argmax', k),
      cache.get('qkv_rope.wgsl', 'qkv_rope_append', k),
      cache.get('qkv_rope.wgsl', 'rope_split', k),
      cache.get('gather.wgsl', 'kv_gather', k),
      cache.get('attention_decode.wgsl', 'attn_split', k),
      cache.get('attention_decode.wgsl', 'attn_reduce', k),
      cache.get('attention_decode.wgsl', 'attn_export', k),
      cache.get('attention_prefill.wgsl', 'causal_attention', k),
      cache.get('attention_prefill.wgsl', 'prefill_scores', k),
    ];
    onCompile?.(0);
    for (const p of list) p.then(() => onCompile?.(++done / list.length), () => {});
    const all = await Promise.all(list);
    const [e, rn, mv, mva, mvs, mm, mma, sw, am, qkv, rs, ga, as, ar, ae, ca, ps] = all;
    return new Kernels(k, pageSize, e, rn, mv, mva, mvs, mm, mma, sw, am, qkv, rs, ga, as, ar, ae, ca, ps);
  }
}

/** cos/sin of pos * theta^(-2i/hd) in f64, stored f32: [positions, hd/2, 2]. */
export function ropeTable(c: ModelConfig, positions: number): Float32Array {
  const half = c.headDim / 2;
  const t = new Float32Array(positions * half * 2);
  for (let i = 0; i < half; i++) {
    const f = Math.pow(c.ropeTheta, (-2 * i) / c.headDim);
    for (let p = 0; p < positions; p++) {
      t[(p * half + i) * 2] = Math.cos(p * f);
      t[(p * half + i) * 2 + 1] = Math.sin(p * f);
    }
  }
  return t;
}
