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

function params(
  u: UniformOf,
  r: AnswerRows,
  o: { row?: number; target?: number; acc?: boolean; n?: number } = {},
): GPUBuffer {
  return u('u.triage', [
    r.first,
    r.rows,
    r.audioStart,
    r.audioLength,
    o.row ?? 0,
    o.target ?? 0,
    o.acc ? 1 : 0,
    o.n ?? 0,
  ]);
}

/** Y[n, cols] (+)= X[n, rows] W over every row part of W (matmul_t.wgsl; cols % 8 == 0); `acc` adds to Y. */
export class MatmulT extends Op {
  run(b: { w: GpuMatrix; x: GPUBuffer; y: GPUBuffer }, n: number, u: UniformOf, acc = false): Dispatch[] {
    const { w, x, y } = b;
    if (w.cols % 8 !== 0) throw new RangeError(`${this.name}: ${w.name} has ${w.cols} columns, not a multiple of 8`);
    this.need('x', x, 4 * n * w.rows);
    this.need('y', y, 4 * n * w.cols);
    return w.parts.map((p, i) =>
      this.dispatch(
        [p.buffer, x, y, u(`${w.name}.t`, [p.rows, w.cols, n, p.row0, w.rows, acc || i > 0 ? 1 : 0])],
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
    private readonly ops: Record<(typeof ENTRIES)[number], Op>,
    private readonly transposed: Map<WeightFormat, MatmulT>,
  ) {}

  static async load(
    cache: PipelineCache,
    c: ModelConfig,
    constants: Constants,
    formats: Iterable<WeightFormat>,
  ): Promise<TriageKernels> {
    const ctx = cache.ctx;
    const pipelines = await Promise.all(ENTRIES.map((e) => cache.get('triage.wgsl', e, constants)));
    const ops = Object.fromEntries(ENTRIES.map((e, i) => [e, new Op(ctx, pipelines[i], e)])) as TriageKernels['ops'];
    const transposed = new Map<WeightFormat, MatmulT>();
    await Promise.all(
      [...new Set(formats)].map(async (f) => {
        const pipeline = await cache.get('matmul_t.wgsl', 'matmul_t', { WEIGHT_FORMAT: WEIGHT_FORMAT_ID[f] });
        transposed.set(f, new MatmulT(ctx, pipeline, `matmul_t ${f}`));
      }),
    );
    return new TriageKernels(ctx, c, ops, transposed);
  }

  matmulT(format: WeightFormat): MatmulT {
    const k = this.transposed.get(format);
    if (!k) throw new Error(`no ${format} transposed product was compiled for the triage`);
    return k;
  }

  /** One answer row: dl = softmax(logits) − onehot(target) over the vocabulary, and its CE into ce[row]. */
  logitGrad(
    b: { logits: Binding; dl: Binding; ce: Binding },
    r: AnswerRows,
    row: number,
    target: number,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf('logit_grad', { 0: params(u, r, { row, target }), 5: b.logits, 6: b.dl, 7: b.ce }, 1);
  }

  /**
   * Every answer row: out (+)= the gradient at an RMSNorm's input from gy at its output;
   * `hidden` holds the norm's input rows, the answer rows from `first` (the final norm reads
   * the prefill's rows in place, a layer's norms the T rows kept for it: first 0).
   */
  normGrad(
    b: { gy: Binding; out: Binding; hidden: Binding; norm: Binding },
    r: AnswerRows,
    first: number,
    acc: boolean,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(
      'norm_grad',
      { 0: params(u, { ...r, first }, { acc }), 5: b.gy, 6: b.out, 8: b.hidden, 9: b.norm },
      r.rows,
    );
  }

  /** dgu [T, 2 I] = ∂/∂[gate | up] from dact [T, I] and the rows' gate and up gu [T, 2 I]. */
  swigluGrad(b: { gu: Binding; dact: Binding; dgu: Binding }, r: AnswerRows, u: UniformOf): Dispatch {
    return this.dispatchOf(
      'swiglu_grad',
      { 0: params(u, r), 5: b.dact, 6: b.dgu, 18: b.gu },
      Math.ceil((r.rows * this.c.intermediateSize) / 64),
    );
  }

  /** a [T, H, audioLength] and coef [T, H, n]: each answer row's softmax over the n prompt rows' keys, and its score gradient. */
  queryGrad(
    b: { q: Binding; k: Binding; v: Binding; o: Binding; delta: Binding; a: Binding; coef: Binding },
    r: AnswerRows,
    n: number,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(
      'query_grad',
      { 0: params(u, r, { n }), 1: b.q, 2: b.k, 3: b.v, 4: b.a, 10: b.o, 11: b.delta, 14: b.coef },
      r.rows,
      this.c.numHeads,
    );
  }

  /** The query columns of dqkv [T, QD + 2 KVD]: Σ_j coef_j k_j, back through RoPE. */
  queryBack(
    b: { coef: Binding; k: Binding; rope: Binding; dqkv: Binding },
    r: AnswerRows,
    n: number,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(
      'query_back',
      { 0: params(u, r, { n }), 2: b.k, 15: b.coef, 16: b.rope, 17: b.dqkv },
      r.rows,
      this.c.numHeads,
    );
  }

  /** hs [T, HKV]: per answer row and KV head, the mean over audio positions of the key gradient's norm. */
  headSensitivity(
    b: { q: Binding; v: Binding; a: Binding; o: Binding; delta: Binding; hs: Binding },
    r: AnswerRows,
    u: UniformOf,
  ): Dispatch {
    return this.dispatchOf(
      'head_sensitivity',
      { 0: params(u, r), 1: b.q, 3: b.v, 10: b.o, 11: b.delta, 12: b.a, 13: b.hs },
      r.rows,
      this.c.numKvHeads,
    );
  }

  private dispatchOf(entry: (typeof ENTRIES)[number], entries: Record<number, Binding>, x: number, y = 1): Dispatch {
    const op = this.ops[entry];
    const [gx, gy] = y === 1 ? grid(x) : [x, y];
    return { pipeline: op.pipeline, bindGroup: this.ctx.bindGroup(op.pipeline, entries, op.name), x: gx, y: gy };
  }
}

const ENTRIES = ['logit_grad', 'norm_grad', 'swiglu_grad', 'query_grad', 'query_back', 'head_sensitivity'] as const;
