/**
 * The decode step encoder: every bind group of a step is created once per session (at
 * applyPrefill, when the plan has sized the pool), and
 * each step is recorded into one command encoder (one compute pass, plus copies into
 * the readback ring) and submitted once. Only the split-K grid size changes between
 * steps (it follows the longest page table); buffers and bind groups never do.
 */
import { audioStart, groupSize, type ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import type { GpuPool } from './pool.js';
import { matvecGroups, type Kernels } from './kernels.js';
import type { SessionBuffers } from './session.js';
import { whole, type GpuWeights } from './weights.js';
import { matvecDispatches } from './weight-formats.js';

interface Dispatch {
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  x: number;
  y: number;
  /** Split-K dispatches take the step's split count as y. */
  splitK?: boolean;
}

/** Byte offsets of the parts of one readback slot. */
export interface ReadbackLayout {
  token: number;
  logits: number;
  weights: number;
  queries: number;
}

export class DecodeStep {
  private readonly dispatches: Dispatch[][] = []; // per layer, then the head
  private readonly head: Dispatch[] = [];
  /** One per row part of the embedding table (each writes the ids in its range). */
  private readonly embed: Dispatch[];
  private readonly exportDispatch: Dispatch | null;
  /** (layer, src offset, dst offset, bytes) of query copies for exported heads. */
  private readonly queryCopies: [number, number, number, number][] = [];
  readonly layout: ReadbackLayout;
  dispatchCount = 0;

  constructor(
    private readonly ctx: GpuContext,
    c: ModelConfig,
    k: Kernels,
    w: GpuWeights,
    private readonly b: SessionBuffers,
    pool: GpuPool,
    decodeHeads: number[],
    decodeQueries: boolean,
    private readonly returnLogits: boolean,
  ) {
    const D = c.hiddenSize;
    const QD = c.numHeads * c.headDim;
    const I = c.intermediateSize;
    const G = groupSize(c);
    const A = b.sizes.audioLength;
    const u = (label: string, v: number[]) => ctx.uniform(label, v);
    const own: GPUBuffer[] = [];
    const uni = (label: string, v: number[]) => {
      const buf = u(label, v);
      own.push(buf);
      return buf;
    };
    this.ownUniforms = own;
    const one = uni('u.rows1', [1, 0, 0, 0]);
    const uO = uni('u.o', [D, QD, 1, 0]);
    const uGu = uni('u.gate_up', [I, D, 1, 0]);
    const uDown = uni('u.down', [D, I, 1, 0]);
    const mk = (pipeline: GPUComputePipeline, res: Parameters<GpuContext['bindGroup']>[1], x: number, y = 1, splitK = false): Dispatch =>
      ({ pipeline, bindGroup: ctx.bindGroup(pipeline, res), x, y, splitK });
    // Pipelines of each matrix's weight format.
    const wk = w.kernels;
    const E = w.embed;
    this.embed = E.parts.map((p) =>
      mk(wk(E.format).embed, [p.buffer, b.tokenIn, b.x, E.parts.length === 1 ? one : uni(`u.embed${p.row0}`, [1, p.row0, p.row0 + p.rows, 0])], 1));
    for (let l = 0; l < c.numLayers; l++) {
      const L = w.layers[l];
      const lu = uni(`u.layer${l}`, [l, pool.baseSlot(l), 0, 0]);
      this.dispatches.push([
        mk(k.rmsnorm, [b.x, L.attnNorm, b.h, one], 1),
        mk(wk(L.qkv.format).qkvRopeAppend, { 0: whole(L.qkv), 1: b.h, 2: b.q, 3: pool.kOf(l), 4: pool.vOf(l), 5: b.rope, 6: b.step, 7: lu, 9: w.qkvBias(l) }, c.numHeads + 2 * c.numKvHeads),
        mk(k.attnSplit, { 0: b.q, 1: pool.kOf(l), 2: pool.vOf(l), 3: pool.positions, 4: pool.tables, 5: pool.scores, 6: pool.partials, 7: lu }, c.numKvHeads, 1, true),
        mk(k.attnReduce, { 4: pool.tables, 6: pool.partials, 7: lu, 8: b.attn, 9: b.ml }, c.numHeads),
        mk(wk(L.o.format).matvecAdd, [whole(L.o), b.attn, b.x, uO], ...matvecGroups(D)),
        mk(k.rmsnorm, [b.x, L.mlpNorm, b.h, one], 1),
        mk(wk(L.gateUp.format).matvecSwiglu, [whole(L.gateUp), b.h, b.act, uGu], ...matvecGroups(I)),
        mk(wk(L.down.format).matvecAdd, [whole(L.down), b.act, b.x, uDown], ...matvecGroups(D)),
      ]);
    }
    // The lm_head as one matvec per row part, each writing its slice of the logits.
    const lm = matvecDispatches(ctx, w.lmHead, b.h, b.logits);
    own.push(...lm.map((d) => d.uniform));
    this.head.push(
      mk(k.rmsnorm, [b.x, w.norm, b.h, one], 1),
      ...lm.map((d) => mk(wk(w.lmHead.format).matvec, d.bindings, ...d.groups)),
      mk(k.argmax, [b.logits, b.tokenOut], 1),
    );
    const R = decodeHeads.length;
    this.exportDispatch = R > 0
      ? mk(k.attnExport, { 3: pool.positions, 4: pool.tables, 5: pool.scores, 10: b.exportW, 11: uni('u.export', [b.exportIndex.length, audioStart(b.sizes.prompt), A, 0]), 12: b.ml }, R)
      : null;
    if (decodeQueries) {
      decodeHeads.forEach((h, r) => {
        const layer = Math.floor(h / c.numKvHeads);
        const kh = h % c.numKvHeads;
        this.queryCopies.push([layer, kh * G * c.headDim * 4, r * G * c.headDim * 4, G * c.headDim * 4]);
      });
    }
    const logitsBytes = returnLogits ? 4 * c.vocabSize : 0;
    this.layout = { token: 0, logits: 16, weights: 16 + logitsBytes, queries: 16 + logitsBytes + 4 * R * A };
  }

  private readonly ownUniforms: GPUBuffer[];

  /** Records one decode step; `splits` = ceil(longest page table / pages per split). */
  encode(splits: number, ring: GPUBuffer): GPUCommandBuffer {
    const enc = this.ctx.device.createCommandEncoder({ label: 'decode step' });
    const b = this.b;
    if (this.exportDispatch) enc.clearBuffer(b.exportW);
    let pass = enc.beginComputePass();
    let count = 0;
    const run = (d: Dispatch) => {
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, d.bindGroup);
      pass.dispatchWorkgroups(d.x, d.splitK ? splits : d.y);
      count++;
    };
    for (const d of this.embed) run(d);
    this.dispatches.forEach((layer, l) => {
      for (const d of layer) run(d);
      const copies = this.queryCopies.filter((q) => q[0] === l);
      if (copies.length) {
        // Queries of this layer are overwritten by the next: copy them out between passes.
        pass.end();
        for (const [, src, dst, bytes] of copies) enc.copyBufferToBuffer(b.q, src, b.exportQ, dst, bytes);
        pass = enc.beginComputePass();
      }
    });
    for (const d of this.head) run(d);
    if (this.exportDispatch) run(this.exportDispatch);
    pass.end();
    const L = this.layout;
    enc.copyBufferToBuffer(b.tokenOut, 0, ring, L.token, 4);
    if (this.returnLogits) enc.copyBufferToBuffer(b.logits, 0, ring, L.logits, L.weights - L.logits);
    if (this.exportDispatch) enc.copyBufferToBuffer(b.exportW, 0, ring, L.weights, L.queries - L.weights);
    if (this.queryCopies.length) enc.copyBufferToBuffer(b.exportQ, 0, ring, L.queries, b.sizes.readbackBytes - L.queries);
    this.dispatchCount = count;
    return enc.finish();
  }

  destroy(): void {
    for (const u of this.ownUniforms) this.ctx.destroy(u);
  }
}
