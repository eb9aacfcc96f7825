/**
 * The typed calls of the triage's kernels (triage.wgsl, matmul_t.wgsl), compiled the first
 * time a triage runs: a transcription never pays for them.
 */
import type { ModelConfig } from '../../model/config.js';
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';
import type { GpuContext } from '../../gpu/device.js';
import { Op, type Binding, type Dispatch, type UniformOf } from '../../gpu/op.js';
import { WEIGHT_FORMAT_ID, type WeightFormat } from '../../model/quant.js';
import type { GpuMatrix } from './weight-formats.js';
import { grid } from './groups.js';

/** Where the answer rows sit in the teacher-forced prompt, and which one a per-row kernel reads. */
export interface AnswerRows {
  /** Absolute row of the first answer row (the last instruction row, which predicts answer[0]). */
  first: number;
  rows: number;
  audioStart: number;
  audioLength: number;
}

function params(u: UniformOf, r: AnswerRows, row = 0, target = 0): GPUBuffer {
  return u('u.triage', [r.first, r.rows, r.audioStart, r.audioLength, row, target, 0, 0]);
}

/** Y[n, cols] (+)= X[n, rows] W over every row part of W (matmul_t.wgsl; cols % 8 == 0). */
export class MatmulT extends Op {
  run(b: { w: GpuMatrix; x: GPUBuffer; y: GPUBuffer }, n: number, u: UniformOf): Dispatch[] {
    const { w, x, y } = b;
    if (w.cols % 8 !== 0) throw new RangeError(`${this.name}: ${w.name} has ${w.cols} columns, not a multiple of 8`);
    this.need('x', x, 4 * n * w.rows);
    this.need('y', y, 4 * n * w.cols);
    return w.parts.map((p, i) =>
      this.dispatch(
        [p.buffer, x, y, u(`${w.name}.t`, [p.rows, w.cols, n, p.row0, w.rows, i > 0 ? 1 : 0])],
        Math.ceil(w.cols / 512),
        n,
      ),
    );
  }
}

export class TriageKernels {
  private constructor(
    private readonly ctx: GpuContext,
    private readonly c: ModelConfig,
    private readonly answer: Op,
    private readonly logit: Op,
    private readonly norm: Op,
    private readonly sensitivity: Op,
    private readonly transposed: Map<WeightFormat, MatmulT>,
  ) {}

  static async load(
    cache: PipelineCache,
    c: ModelConfig,
    constants: Constants,
    formats: Iterable<WeightFormat>,
  ): Promise<TriageKernels> {
    const ctx = cache.ctx;
    const get = (entry: string) => cache.get('triage.wgsl', entry, constants);
    const [a, l, n, s] = await Promise.all(
      ['answer_attention', 'logit_grad', 'norm_grad', 'head_sensitivity'].map(get),
    );
    const transposed = new Map<WeightFormat, MatmulT>();
    await Promise.all(
      [...new Set(formats)].map(async (f) => {
        const pipeline = await cache.get('matmul_t.wgsl', 'matmul_t', { WEIGHT_FORMAT: WEIGHT_FORMAT_ID[f] });
        transposed.set(f, new MatmulT(ctx, pipeline, `matmul_t ${f}`));
      }),
    );
    return new TriageKernels(
      ctx,
      c,
      new Op(ctx, a, 'answer_attention'),
      new Op(ctx, l, 'logit_grad'),
      new Op(ctx, n, 'norm_grad'),
      new Op(ctx, s, 'head_sensitivity'),
      transposed,
    );
  }

  matmulT(format: WeightFormat): MatmulT {
    const k = this.transposed.get(format);
    if (!k) throw new Error(`no ${format} transposed product was compiled for the triage`);
    return k;
  }

  /** a [T, H, audioLength] from the answer rows' queries, the layer's K and the prefill's (max, sum). */
  answerAttention(b: { q: Binding; k: Binding; ml: Binding; a: Binding }, r: AnswerRows, u: UniformOf): Dispatch {
    return this.dispatchOf(
      this.answer,
      { 0: params(u, r), 1: b.q, 2: b.k, 3: b.ml, 4: b.a },
      Math.ceil(r.audioLength / 64),
      r.rows * this.c.numHeads,
    );
  }

  /** One answer row: dl = softmax(logits) − onehot(target) over the vocabulary, and its CE into ce[row]. */
  logitGrad(
    b: { logits: Binding; dl: Binding; ce: Binding },
    r: AnswerRows,
    row: number,
    target: number,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(this.logit, { 0: params(u, r, row, target), 5: b.logits, 6: b.dl, 7: b.ce }, 1);
  }

  /** One answer row: r[row] = ∂CE/∂x back through the final RMSNorm, from gy = W_Uᵀ dl. */
  normGrad(
    b: { gy: Binding; r: Binding; hidden: Binding; norm: Binding },
    r: AnswerRows,
    row: number,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(this.norm, { 0: params(u, r, row), 5: b.gy, 6: b.r, 8: b.hidden, 9: b.norm }, 1);
  }

  /** hs [T, HKV]: per answer row and KV head, the mean over audio positions of the direct-path key gradient's norm. */
  headSensitivity(
    b: { q: Binding; v: Binding; a: Binding; o: Binding; delta: Binding; hs: Binding },
    r: AnswerRows,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(
      this.sensitivity,
      { 0: params(u, r), 1: b.q, 2: b.v, 10: b.o, 11: b.delta, 12: b.a, 13: b.hs },
      r.rows,
      this.c.numKvHeads,
    );
  }

  private dispatchOf(op: Op, entries: Record<number, Binding>, x: number, y = 1): Dispatch {
    const [gx, gy] = y === 1 ? grid(x) : [x, y];
    return { pipeline: op.pipeline, bindGroup: this.ctx.bindGroup(op.pipeline, entries, op.name), x: gx, y: gy };
  }
}
