/**
 * The kernel catalogue: every kernel the decoder runs as a typed op (ops.ts,
 * attention-ops.ts, product-ops.ts), its pipeline specialised by constants from the model
 * config and the pool's page size, compiled once per (config, page size).
 * Both the backend and the kernel tests dispatch through these.
 */
import type { KvPrecision } from '../../kv/precision.js';
import { groupSize, type ModelConfig } from '../../model/config.js';
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';
import { Argmax, Embed, KvGather, RmsNorm, ScatterRows, Swiglu } from './ops.js';
import {
  AppendPositions,
  AttnExport,
  AttnReduce,
  AttnSplit,
  CausalAttention,
  ChunkSelect,
  FocusTop,
  PrefillScores,
  QkvRopeAppend,
  RopeSplit,
} from './attention-ops.js';
import { loadProductOps, type ProductOps } from './product-ops.js';

export { MAX_GROUPS, grid, matmulGroups, matvecGroups } from './groups.js';

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

/** The ops of the decoder's kernels, compiled for one (config, page size, KV precision). */
export class Kernels {
  private constructor(
    readonly constants: Constants,
    readonly pageSize: number,
    readonly embed: Embed,
    readonly rmsnorm: RmsNorm,
    /** The f32 weight products (weight-kernels.ts gives each format's). */
    readonly products: ProductOps,
    readonly swiglu: Swiglu,
    readonly argmax: Argmax,
    readonly qkvRopeAppend: QkvRopeAppend,
    readonly appendPositions: AppendPositions,
    readonly ropeSplit: RopeSplit,
    readonly gather: KvGather,
    readonly attnSplit: AttnSplit,
    readonly attnReduce: AttnReduce,
    readonly attnExport: AttnExport,
    readonly causalAttention: CausalAttention,
    readonly prefillScores: PrefillScores,
    /** WnW's chunk choice from the exported anchors' attention (chunk_select.wgsl). */
    readonly chunkSelect: ChunkSelect,
    /** Word timing's focus from the exported anchors' attention (focus.wgsl). */
    readonly focusTop: FocusTop,
    /** A decode step's KV writes from its one upload (scatter_rows.wgsl). */
    readonly scatterRows: ScatterRows,
  ) {}

  get pagesPerSplit(): number {
    return this.constants.PPS as number;
  }

  static async load(
    cache: PipelineCache,
    c: ModelConfig,
    pageSize: number,
    onCompile?: (fraction: number) => void,
    precision: KvPrecision = 'f32',
  ): Promise<Kernels> {
    // The matmuls and attention read vec4 rows of every weight, activation and head.
    for (const [name, v] of [
      ['hidden_size', c.hiddenSize],
      ['intermediate_size', c.intermediateSize],
      ['num_heads * head_dim', c.numHeads * c.headDim],
      ['head_dim', c.headDim],
    ] as const) {
      if (v % 4 !== 0) throw new RangeError(`the WebGPU kernels need ${name} (${v}) to be a multiple of 4`);
    }
    const k = modelConstants(c, pageSize, precision);
    const ctx = cache.ctx;
    let done = 0;
    const counted = <T>(p: Promise<T>): Promise<T> => {
      p.then(
        () => onCompile?.(++done / 21),
        () => {},
      );
      return p;
    };
    const get = (file: string, entry: string) => counted(cache.get(file, entry, k));
    onCompile?.(0);
    // The products are 5 of the 21 pipelines, in the f32 weight format of the reference model.
    const products = loadProductOps(cache, 'f32', k, counted);
    const [e, rn, sw, am, qkv, ap, rs, ga, as, ar, ae, ca, ps, cs, fo, sc] = await Promise.all([
      get('embed.wgsl', 'embed'),
      get('rmsnorm.wgsl', 'rmsnorm'),
      get('swiglu.wgsl', 'swiglu'),
      get('argmax.wgsl', 'argmax'),
      get('qkv_rope.wgsl', 'qkv_rope_append'),
      get('qkv_rope.wgsl', 'append_positions'),
      get('qkv_rope.wgsl', 'rope_split'),
      get('gather.wgsl', 'kv_gather'),
      get('attention_decode.wgsl', 'attn_split'),
      get('attention_decode.wgsl', 'attn_reduce'),
      get('attention_decode.wgsl', 'attn_export'),
      get('attention_prefill.wgsl', 'causal_attention'),
      get('attention_prefill.wgsl', 'prefill_scores'),
      get('chunk_select.wgsl', 'chunk_select'),
      get('focus.wgsl', 'focus_top'),
      get('scatter_rows.wgsl', 'scatter_rows'),
    ]);
    return new Kernels(
      k,
      pageSize,
      new Embed(ctx, e, c),
      new RmsNorm(ctx, rn, c),
      await products,
      new Swiglu(ctx, sw, c),
      new Argmax(ctx, am, c),
      new QkvRopeAppend(ctx, qkv, 'qkv_rope_append', c),
      new AppendPositions(ctx, ap, 'append_positions', c),
      new RopeSplit(ctx, rs, 'rope_split', c),
      new KvGather(ctx, ga, c),
      new AttnSplit(ctx, as, 'attn_split', c),
      new AttnReduce(ctx, ar, 'attn_reduce', c),
      new AttnExport(ctx, ae, 'attn_export', c),
      new CausalAttention(ctx, ca, 'causal_attention', c),
      new PrefillScores(ctx, ps, 'prefill_scores', c),
      new ChunkSelect(ctx, cs, 'chunk_select'),
      new FocusTop(ctx, fo, 'focus_top'),
      new ScatterRows(ctx, sc),
    );
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
