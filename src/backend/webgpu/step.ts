/**
 * The decode step encoder: every bind group of a step is created once per session (at
 * its placement, when the plan has sized the pool), and
 * each step is recorded into one command encoder (one compute pass, plus copies into
 * the readback ring) and submitted once. Only the split-K grid size changes between
 * steps (it follows the longest page table); buffers and bind groups never do.
 */
import { audioStart, groupSize, kvHeadCount, type ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import { sharedUniforms, type Dispatch } from '../../gpu/op.js';
import type { GpuPool } from './pool.js';
import type { Kernels } from './kernels.js';
import { readbackLayout, type ReadbackLayout, type SessionBuffers } from './session-buffers.js';
import type { GpuWeights } from './weights.js';
import type { RawReadings } from '../readouts.js';
import { focusOfReadback } from './attention-ops.js';

/** What a decode step runs on: the device, the model's shape, its kernels and weights. */
export interface StepEngine {
  readonly ctx: GpuContext;
  readonly config: ModelConfig;
  readonly kernels: Kernels;
  readonly weights: GpuWeights;
}

/** What a step copies back for the CPU, as the session's request asks. */
export interface StepReads {
  decodeHeads: number[];
  decodeQueries: boolean;
  returnLogits: boolean;
  /** The exported weights themselves (not only reduced to chunks). */
  copyWeights: boolean;
  /** The chunk heads' weights per segment (the tide chart). */
  segmentSums: boolean;
}

export class DecodeStep {
  private readonly dispatches: Dispatch[][] = []; // per layer, then the head
  private readonly head: Dispatch[] = [];
  private readonly appendPositions: Dispatch;
  /** One per row part of the embedding table (each writes the ids in its range). */
  private readonly embed: Dispatch[];
  private readonly exportDispatch: Dispatch | null;
  /** WnW's chunk choice from the exported anchors (chunk_select.wgsl), where the session asks for it. */
  private readonly chunkDispatch: Dispatch | null;
  /** Word timing's focus from the exported anchors (focus.wgsl), where the session asks for it. */
  private readonly focusDispatch: Dispatch | null;
  /** Whether the exported weights themselves are read back (not only reduced to chunks). */
  private readonly copyWeights: boolean;
  /** (layer, src offset, dst offset, bytes) of query copies for exported heads. */
  private readonly queryCopies: [number, number, number, number][] = [];
  /** Per layer, its query copies (src, dst, bytes), or null: what `encode` looks up each step. */
  private readonly copiesOf: ([number, number, number][] | null)[] = [];
  readonly layout: ReadbackLayout;
  dispatchCount = 0;

  private readonly ctx: GpuContext;
  private readonly returnLogits: boolean;
  private readonly segmentSums: boolean;

  constructor(
    e: StepEngine,
    private readonly b: SessionBuffers,
    pool: GpuPool,
    reads: StepReads,
  ) {
    const { ctx, config: c, kernels: k, weights: w } = e;
    const { decodeHeads, decodeQueries, copyWeights } = reads;
    this.ctx = ctx;
    this.returnLogits = reads.returnLogits;
    this.segmentSums = reads.segmentSums;
    const G = groupSize(c);
    const A = b.sizes.audioLength;
    const own: GPUBuffer[] = [];
    this.ownUniforms = own;
    // Read-only uniforms of equal values are one buffer (every layer's norms, say).
    const u = sharedUniforms(ctx, (buf) => own.push(buf));
    // Ops of each matrix's weight format.
    const wk = w.kernels;
    // Before any attention reads them: the positions of the slots this step appends to.
    this.appendPositions = k.appendPositions.run({ step: b.step, positions: pool.positions }, kvHeadCount(c), u);
    this.embed = wk(w.embed.format).embed.run({ table: w.embed, ids: b.tokenIn, x: b.x }, 1, u);
    for (let l = 0; l < c.numLayers; l++) {
      const L = w.layers[l];
      const at = { layer: l, base: pool.baseSlot(l) };
      const kv = { kPool: pool.kOf(l), vPool: pool.vOf(l) };
      const paged = { positions: pool.positions, tables: pool.tables, scores: pool.scores };
      this.dispatches.push([
        k.rmsnorm.run({ x: b.x, w: L.attnNorm, y: b.h }, { rows: 1 }, u),
        wk(L.qkv.format).qkvRopeAppend.run(
          { w: L.qkv, x: b.h, q: b.q, ...kv, rope: b.rope, step: b.step, bias: w.qkvBias(l) },
          at,
          u,
        ),
        k.attnSplit.run({ q: b.q, ...kv, ...paged, partials: pool.partials }, at, u),
        k.attnReduce.run({ tables: pool.tables, partials: pool.partials, out: b.attn, ml: b.ml }, at, u),
        ...wk(L.o.format).matvecAdd.run({ w: L.o, x: b.attn, y: b.x }, u),
        k.rmsnorm.run({ x: b.x, w: L.mlpNorm, y: b.h }, { rows: 1 }, u),
        wk(L.gateUp.format).matvecSwiglu.run({ w: L.gateUp, x: b.h, y: b.act }, u),
        ...wk(L.down.format).matvecAdd.run({ w: L.down, x: b.act, y: b.x }, u),
      ]);
    }
    // The lm_head as one matvec per row part, each writing its slice of the logits.
    this.head.push(
      k.rmsnorm.run({ x: b.x, w: w.norm, y: b.h }, { rows: 1 }, u),
      ...wk(w.lmHead.format).matvec.run({ w: w.lmHead, x: b.h, y: b.logits }, u),
      k.argmax.run({ logits: b.logits, token: b.tokenOut }),
    );
    const R = decodeHeads.length;
    this.exportDispatch =
      R > 0
        ? k.attnExport.run(
            { positions: pool.positions, tables: pool.tables, scores: pool.scores, weights: b.exportW, ml: b.ml },
            { exported: R, heads: b.exportIndex.length, audioStart: audioStart(b.sizes.prompt), audioLength: A },
            u,
          )
        : null;
    if (decodeQueries) {
      decodeHeads.forEach((h, r) => {
        const layer = Math.floor(h / c.numKvHeads);
        const kh = h % c.numKvHeads;
        this.queryCopies.push([layer, kh * G * c.headDim * 4, r * G * c.headDim * 4, G * c.headDim * 4]);
      });
    }
    for (let l = 0; l < c.numLayers; l++) {
      const of = this.queryCopies
        .filter((q) => q[0] === l)
        .map(([, src, dst, bytes]) => [src, dst, bytes] as [number, number, number]);
      this.copiesOf.push(of.length ? of : null);
    }
    const ch = b.chunks;
    this.chunkDispatch =
      ch && this.exportDispatch
        ? k.chunkSelect.run(
            { weights: b.exportW, scales: ch.scales, segSums: ch.segSums, scores: ch.scores, chosen: ch.chosen },
            ch.spec,
            u,
          )
        : null;
    const fo = b.focus;
    this.focusDispatch =
      fo && this.exportDispatch
        ? k.focusTop.run({ weights: b.exportW, top: fo.top }, { heads: fo.heads, audioLength: A }, u)
        : null;
    this.layout = readbackLayout(
      c,
      {
        request: {
          decodeHeads,
          decodeQueries,
          decodeWeights: copyWeights,
          decodeChunks: ch ? { ...ch.spec, segmentSums: this.segmentSums } : undefined,
          decodeFocus: fo ?? undefined,
          prefillQueries: 0,
        },
        returnLogits: this.returnLogits,
      },
      A,
    );
    this.copyWeights = R > 0 && copyWeights;
    this.shape = { R, A, gq: G * c.headDim };
    // The token (4 of the slot's 16 header bytes) and every part after the header.
    this.readbackBytes = 4 + this.layout.end - this.layout.logits;
    this.layerDispatches = this.dispatches[0]?.length ?? 0;
  }

  /** A mapped readback slot of this step: the token, and the logits, weights, queries, chunks and focus the session asked for. */
  read(data: ArrayBuffer): { token: number; logits?: Float32Array; observation: Omit<RawReadings, 'step'> } {
    const L = this.layout;
    const { R, A, gq } = this.shape;
    const token = new Uint32Array(data, L.token, 1)[0];
    const logits = this.returnLogits ? new Float32Array(data.slice(L.logits, L.weights)) : undefined;
    const weights = this.copyWeights
      ? Array.from(
          { length: R },
          (_, i) => new Float32Array(data.slice(L.weights + 4 * i * A, L.weights + 4 * (i + 1) * A)),
        )
      : [];
    const queries = this.queryCopies.length
      ? Array.from(
          { length: R },
          (_, i) => new Float32Array(data.slice(L.queries + 4 * i * gq, L.queries + 4 * (i + 1) * gq)),
        )
      : undefined;
    const observation: Omit<RawReadings, 'step'> = { weights, queries };
    if (this.chunkDispatch) observation.chunks = new Int32Array(data.slice(L.chunks, L.segmentSums));
    if (this.chunkDispatch && this.segmentSums)
      observation.segmentSums = new Float32Array(data.slice(L.segmentSums, L.focus));
    if (this.focusDispatch) observation.focus = focusOfReadback(data.slice(L.focus, L.end));
    return { token, logits, observation };
  }

  private readonly shape: { R: number; A: number; gq: number };

  /** Bytes a step copies into its readback slot (what the CPU reads of it). */
  readonly readbackBytes: number;
  /** Dispatches one layer records. */
  readonly layerDispatches: number;

  private readonly ownUniforms: GPUBuffer[];

  /** Records one decode step; `splits` = ceil(longest page table / pages per split). */
  encode(splits: number, ring: GPUBuffer, before?: (enc: GPUCommandEncoder) => void): GPUCommandBuffer {
    const enc = this.ctx.device.createCommandEncoder({ label: 'decode step' });
    // Copies the step needs first (the last plan's recalled rows), in the same submit.
    before?.(enc);
    const b = this.b;
    if (this.exportDispatch) enc.clearBuffer(b.exportW);
    let pass = enc.beginComputePass();
    let count = 0;
    // Consecutive dispatches of one kernel (a matrix's row parts) keep the pipeline set.
    let pipeline: GPUComputePipeline | null = null;
    const run = (d: Dispatch) => {
      if (d.pipeline !== pipeline) pass.setPipeline((pipeline = d.pipeline));
      pass.setBindGroup(0, d.bindGroup);
      pass.dispatchWorkgroups(d.x, d.splitK ? splits : d.y, d.z ?? 1);
      count++;
    };
    run(this.appendPositions);
    for (const d of this.embed) run(d);
    const layers = this.dispatches;
    for (let l = 0; l < layers.length; l++) {
      const layer = layers[l];
      for (let i = 0; i < layer.length; i++) run(layer[i]);
      const copies = this.copiesOf[l];
      if (copies) {
        // Queries of this layer are overwritten by the next: copy them out between passes.
        pass.end();
        for (const [src, dst, bytes] of copies) enc.copyBufferToBuffer(b.q, src, b.exportQ, dst, bytes);
        pass = enc.beginComputePass();
        pipeline = null;
      }
    }
    for (const d of this.head) run(d);
    if (this.exportDispatch) run(this.exportDispatch);
    if (this.chunkDispatch) run(this.chunkDispatch);
    if (this.focusDispatch) run(this.focusDispatch);
    pass.end();
    const L = this.layout;
    enc.copyBufferToBuffer(b.tokenOut, 0, ring, L.token, 4);
    // The greedy token feeds the next step's embedding lookup without a trip to the CPU (a
    // token the CPU writes before the next submit replaces it: teacher forcing, step()).
    enc.copyBufferToBuffer(b.tokenOut, 0, b.tokenIn, 0, 4);
    if (this.returnLogits) enc.copyBufferToBuffer(b.logits, 0, ring, L.logits, L.weights - L.logits);
    if (this.copyWeights) enc.copyBufferToBuffer(b.exportW, 0, ring, L.weights, L.queries - L.weights);
    if (this.queryCopies.length) enc.copyBufferToBuffer(b.exportQ, 0, ring, L.queries, L.chunks - L.queries);
    if (this.chunkDispatch && b.chunks) {
      enc.copyBufferToBuffer(b.chunks.chosen, 0, ring, L.chunks, L.segmentSums - L.chunks);
      if (this.segmentSums) enc.copyBufferToBuffer(b.chunks.segSums, 0, ring, L.segmentSums, L.focus - L.segmentSums);
    }
    if (this.focusDispatch && b.focus) enc.copyBufferToBuffer(b.focus.top, 0, ring, L.focus, L.end - L.focus);
    this.dispatchCount = count;
    return enc.finish();
  }

  destroy(): void {
    for (const u of this.ownUniforms) this.ctx.destroy(u);
  }
}
