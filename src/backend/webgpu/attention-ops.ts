/**
 * The typed calls of the attention path: the QKV projection + RoPE (qkv_rope.wgsl), paged
 * decode attention (attention_decode.wgsl) and causal prefill attention
 * (attention_prefill.wgsl). The shaders of a file share one binding list, so the numbers
 * here are sparse: each kernel binds the entries it reads.
 */
import type { ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import { Op, type Binding, type Dispatch, type UniformOf } from '../../gpu/op.js';
import type { GpuMatrix } from './weight-formats.js';
import { whole } from './product-ops.js';
import { chunkCounts, type ChunkSelectSpec } from '../../reference/chunk-select.js';
import { focusCentre } from '../../reference/focus.js';

abstract class ModelOp extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    name: string,
    protected readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, name);
  }

  protected get qd(): number {
    return this.c.numHeads * this.c.headDim;
  }
}

/** The (layer, first slot of its pool shard) uniform the decode kernels of a layer share. */
function layerUniform(u: UniformOf, layer: number, base: number): GPUBuffer {
  return u(`u.layer${layer}`, [layer, base, 0, 0]);
}

/** Decode: q, and the rotated key and the value written into the layer's pool slots. */
export class QkvRopeAppend extends ModelOp {
  run(
    b: {
      w: GpuMatrix;
      x: Binding;
      q: Binding;
      kPool: Binding;
      vPool: Binding;
      rope: Binding;
      step: Binding;
      bias: Binding;
    },
    p: { layer: number; base: number },
    u: UniformOf,
  ): Dispatch {
    const c = this.c;
    this.need('x', b.x, 4 * c.hiddenSize);
    this.need('q', b.q, 4 * this.qd);
    return this.dispatch(
      {
        0: whole(b.w),
        1: b.x,
        2: b.q,
        3: b.kPool,
        4: b.vPool,
        5: b.rope,
        6: b.step,
        7: layerUniform(u, p.layer, p.base),
        9: b.bias,
      },
      c.numHeads + 2 * c.numKvHeads,
    );
  }
}

/**
 * Decode: the step's position into the pool's entry of every (layer, KV head)'s new slot,
 * the slots the step's qkv_rope_append writes (reference: appendPositions).
 */
export class AppendPositions extends ModelOp {
  run(b: { step: Binding; positions: Binding }, heads: number, u: UniformOf): Dispatch {
    this.need('step', b.step, 16 + 4 * heads);
    return this.dispatch(
      { 6: b.step, 8: u('u.appendPositions', [heads, 0, 0, 0]), 10: b.positions },
      Math.ceil(heads / 64),
    );
  }
}

/** Prefill: the rows of a QKV matmul output rotated into q and the layer's prefill K/V. */
export class RopeSplit extends ModelOp {
  run(
    b: { qkv: Binding; q: Binding; k: Binding; v: Binding; rope: Binding; bias: Binding },
    p: { rows: number; pos0: number },
    u: UniformOf,
  ): Dispatch {
    const kvd = this.c.numKvHeads * this.c.headDim;
    this.need('qkv', b.qkv, 4 * p.rows * (this.qd + 2 * kvd));
    this.need('q', b.q, 4 * p.rows * this.qd);
    return this.dispatch(
      { 1: b.qkv, 2: b.q, 3: b.k, 4: b.v, 5: b.rope, 8: u('u.rope', [p.rows, p.pos0, 0, 0]), 9: b.bias },
      p.rows,
    );
  }
}

interface PagedPool {
  positions: Binding;
  tables: Binding;
  scores: Binding;
}

/** Split-K paged attention of one layer: partials per (query head, split); y is the step's split count. */
export class AttnSplit extends ModelOp {
  run(
    b: PagedPool & { q: Binding; kPool: Binding; vPool: Binding; partials: Binding },
    p: { layer: number; base: number },
    u: UniformOf,
  ): Dispatch {
    this.need('q', b.q, 4 * this.qd);
    return this.dispatch(
      {
        0: b.q,
        1: b.kPool,
        2: b.vPool,
        3: b.positions,
        4: b.tables,
        5: b.scores,
        6: b.partials,
        7: layerUniform(u, p.layer, p.base),
      },
      this.c.numKvHeads,
      1,
      1,
      true,
    );
  }
}

/** Merges a layer's partials into its attention output and keeps each head's (max, sum). */
export class AttnReduce extends ModelOp {
  run(
    b: { tables: Binding; partials: Binding; out: Binding; ml: Binding },
    p: { layer: number; base: number },
    u: UniformOf,
  ): Dispatch {
    this.need('out', b.out, 4 * this.qd);
    return this.dispatch(
      { 4: b.tables, 6: b.partials, 7: layerUniform(u, p.layer, p.base), 8: b.out, 9: b.ml },
      this.c.numHeads,
    );
  }
}

/**
 * The exported heads' softmax weights over the audio, scattered to audio offsets: one
 * workgroup per exported head, which finds its head among all `heads` flat heads.
 */
export class AttnExport extends ModelOp {
  run(
    b: PagedPool & { weights: Binding; ml: Binding },
    p: { exported: number; heads: number; audioStart: number; audioLength: number },
    u: UniformOf,
  ): Dispatch {
    this.need('weights', b.weights, 4 * p.exported * p.audioLength);
    return this.dispatch(
      {
        3: b.positions,
        4: b.tables,
        5: b.scores,
        10: b.weights,
        11: u('u.export', [p.heads, p.audioStart, p.audioLength, 0]),
        12: b.ml,
      },
      p.exported,
    );
  }
}

/**
 * The uniform prefill attention and its scores share: a block of rows [row0, n) of
 * `layer`, the audio span and the first query row whose weights are summed.
 */
export function prefillAttentionUniform(
  u: UniformOf,
  p: { row0: number; n: number; audioStart: number; audioLength: number; firstQuery: number; layer: number },
): GPUBuffer {
  return u(`u.attn${p.layer}.${p.row0}`, [p.n, p.audioStart, p.audioLength, p.firstQuery, p.layer, 0, 0, p.row0]);
}

/** Causal attention of a block of `rows` query rows over every key up to the block's end. */
export class CausalAttention extends ModelOp {
  run(b: { q: Binding; k: Binding; v: Binding; out: Binding; ml: Binding; params: GPUBuffer }, rows: number): Dispatch {
    this.need('q', b.q, 4 * rows * this.qd);
    this.need('out', b.out, 4 * rows * this.qd);
    return this.dispatch([b.q, b.k, b.v, b.out, b.ml, b.params], Math.ceil(rows / 64), this.c.numHeads);
  }
}

/** Adds a block's share of the prefill scores: per KV head, the weight of each audio position. */
export class PrefillScores extends ModelOp {
  run(b: { q: Binding; k: Binding; scores: Binding; ml: Binding; params: GPUBuffer }, audioLength: number): Dispatch {
    return this.dispatch(
      { 0: b.q, 1: b.k, 5: b.params, 6: b.scores, 7: b.ml },
      Math.ceil(audioLength / 64),
      this.c.numKvHeads,
    );
  }
}

/**
 * chunk_select.wgsl: the top `topChunks` chunks of the anchors' attention (the first
 * `heads` rows of `weights`), best first, into `chosen`; the segment sums into `segSums`.
 * `scales` holds chunkScales(spec) (src/reference/chunk-select.ts), `scores` one f32 per chunk.
 */
export class ChunkSelect extends Op {
  run(
    b: { weights: Binding; scales: Binding; segSums: Binding; scores: Binding; chosen: Binding },
    s: ChunkSelectSpec,
    u: UniformOf,
  ): Dispatch {
    const { segments, chunks } = chunkCounts(s);
    this.need('weights', b.weights, 4 * s.heads * s.audioLength);
    this.need('scales', b.scales, 4 * chunks);
    this.need('segSums', b.segSums, 4 * segments);
    this.need('scores', b.scores, 4 * chunks);
    this.need('chosen', b.chosen, 4 * Math.min(s.topChunks, chunks));
    const params = [s.heads, s.audioLength, s.segmentLength, s.chunkSegments, s.topChunks, segments, chunks, 0];
    return this.dispatch([b.weights, b.scales, b.segSums, b.scores, b.chosen, u('u.chunks', params)], 1);
  }
}

/** Readback entries of focus.wgsl: four positions, then their four summed weights. */
export const FOCUS_ENTRIES = 8;

/**
 * focus.wgsl: word timing's top four positions of the anchors' summed attention (the first
 * `heads` rows of `weights`), positions then weights into `top` (reference/focus.ts focusCentre
 * takes their centre).
 */
export class FocusTop extends Op {
  run(b: { weights: Binding; top: Binding }, s: { heads: number; audioLength: number }, u: UniformOf): Dispatch {
    this.need('weights', b.weights, 4 * s.heads * s.audioLength);
    this.need('top', b.top, 4 * FOCUS_ENTRIES);
    return this.dispatch([b.weights, b.top, u('u.focus', [s.heads, s.audioLength, 0, 0])], 1);
  }
}

/** focus.wgsl's output (four positions, NONE past the last with mass, then their weights) as focusOf's value. */
export function focusOfReadback(bytes: ArrayBuffer): number {
  const pos = new Uint32Array(bytes, 0, 4);
  const w = new Float32Array(bytes, 16, 4);
  const i = pos.indexOf(0xffffffff);
  const n = i < 0 ? 4 : i;
  return focusCentre(pos.subarray(0, n), w.subarray(0, n));
}
