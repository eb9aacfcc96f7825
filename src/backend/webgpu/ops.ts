/**
 * The typed calls of the decoder's row kernels: the embedding gather, RMSNorm, SwiGLU,
 * argmax and the prefill-to-pool gather. Each binds its buffers by name in its shader's
 * binding order, writes its shader's uniform and checks the sizes it is given.
 */
import type { ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import { Op, type Binding, type Dispatch, type UniformOf } from '../../gpu/op.js';
import { grid } from './groups.js';
import type { GpuMatrix } from './weight-formats.js';

/** embed.wgsl: the token rows of x from the table (audio rows, ids < 0, are left as they are). */
export class Embed extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, 'embed');
  }

  /** One dispatch per row part of the table, each writing the rows whose id falls in its part. */
  run(b: { table: GpuMatrix; ids: Binding; x: Binding }, rows: number, u: UniformOf): Dispatch[] {
    this.need('ids', b.ids, 4 * rows);
    this.need('x', b.x, 4 * rows * this.c.hiddenSize);
    const single = b.table.parts.length === 1;
    return b.table.parts.map((p) =>
      this.dispatch(
        [p.buffer, b.ids, b.x, u('u.embed', single ? [rows, 0, 0, 0] : [rows, p.row0, p.row0 + p.rows, 0])],
        ...grid(rows),
      ),
    );
  }
}

/** rmsnorm.wgsl: y[outRow0 + r] = norm(x[inRow0 + r]) · w for r < rows. */
export class RmsNorm extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, 'rmsnorm');
  }

  run(
    b: { x: Binding; w: Binding; y: Binding },
    p: { rows: number; inRow0?: number; outRow0?: number },
    u: UniformOf,
  ): Dispatch {
    const { rows, inRow0 = 0, outRow0 = 0 } = p;
    const row = 4 * this.c.hiddenSize;
    this.need('x', b.x, (inRow0 + rows) * row);
    this.need('w', b.w, row);
    this.need('y', b.y, (outRow0 + rows) * row);
    return this.dispatch([b.x, b.w, b.y, u('u.rmsnorm', [rows, inRow0, outRow0, 0])], Math.ceil(rows / 64));
  }
}

/** swiglu.wgsl: act[n, I] = silu(gate) · up of gateUp [n, 2 I]. */
export class Swiglu extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, 'swiglu');
  }

  run(b: { gateUp: Binding; act: Binding }, rows: number, u: UniformOf): Dispatch {
    const I = this.c.intermediateSize;
    this.need('gateUp', b.gateUp, 8 * rows * I);
    this.need('act', b.act, 4 * rows * I);
    return this.dispatch([b.gateUp, b.act, u('u.act', [rows, 0, 0, 0])], ...grid(Math.ceil((rows * I) / 64)));
  }
}

/** argmax.wgsl: the index of the largest logit (the lowest of ties). */
export class Argmax extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, 'argmax');
  }

  run(b: { logits: Binding; token: Binding }): Dispatch {
    this.need('logits', b.logits, 4 * this.c.vocabSize);
    this.need('token', b.token, 4);
    return this.dispatch([b.logits, b.token], 1);
  }
}

/**
 * gather.wgsl: the (slot, seq, kh) entries [first, first + count) copy rows of a layer's
 * prefill K/V into the pool shard that starts at slot `base`.
 */
export class KvGather extends Op {
  constructor(
    ctx: GpuContext,
    pipeline: GPUComputePipeline,
    private readonly c: ModelConfig,
  ) {
    super(ctx, pipeline, 'kv_gather');
  }

  run(
    b: { entries: Binding; srcK: Binding; srcV: Binding; kPool: Binding; vPool: Binding },
    p: { first: number; count: number; base: number },
    u: UniformOf,
  ): Dispatch {
    this.need('entries', b.entries, 12 * (p.first + p.count));
    return this.dispatch(
      [b.entries, b.srcK, b.srcV, b.kPool, b.vPool, u('u.gather', [p.first, p.count, p.base, 0])],
      ...grid(Math.ceil((p.count * this.c.headDim) / 64)),
    );
  }
}

/**
 * scatter_rows.wgsl: a step's landing buffer (index table, rows, words) written into one
 * shard's K and V (its rows) and, where `words`, into the positions and the page tables.
 * The grid is the step's entry count, set on the dispatch as each step is encoded.
 */
export class ScatterRows extends Op {
  constructor(ctx: GpuContext, pipeline: GPUComputePipeline) {
    super(ctx, pipeline, 'scatter_rows');
  }

  run(
    b: { landing: Binding; kPool: Binding; vPool: Binding; positions: Binding; tables: Binding },
    p: { shard: number; words: boolean },
    u: UniformOf,
  ): Dispatch {
    this.need('landing', b.landing, 16);
    return this.dispatch(
      [b.landing, b.kPool, b.vPool, b.positions, b.tables, u('u.scatter', [p.shard, p.words ? 1 : 0, 0, 0])],
      1,
    );
  }
}
