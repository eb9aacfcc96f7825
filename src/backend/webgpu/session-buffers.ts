/**
 * Per-session GPU memory: the decode step's buffers, the readback ring, and the prefill
 * buffers that live only until the pool has been filled: every layer's prompt K/V for
 * a whole-prompt prefill and its placement, one layer's (reused by the next) for a layered one. The KV
 * pool is sized later, from the policy's plan (pool-layout.ts), and grows as text is
 * generated. `sessionSizes` computes every size from the config and the session options
 * alone, so an impossible context fails with ContextTooLongError before any GPU work.
 *
 * Only the hidden states (the one residual stream, audio embeddings written straight
 * into their rows) and one layer's K/V hold the whole prompt; every other prefill buffer
 * holds one block of rows, and the block is sized for memory (PREFILL_BLOCK_BYTES), not
 * only for the binding, since the gate/up block alone is 2 × intermediate floats a row.
 * The prompt K/V are stored in the pool's precision (f16 pairs for an f16 pool): the pool
 * keeps nothing finer, and f32 would double the two largest buffers after the hidden states.
 */
import { RING_SLOTS } from './step-ring.js';
import { chunkCounts, chunkScales, type ChunkSelectSpec } from '../../reference/chunk-select.js';
import type { ExportRequest } from '../readouts.js';
import type { SessionShape } from '../session.js';
import { ContextTooLongError } from '../../errors.js';
import {
  groupSize,
  kvHeadCount,
  promptLength,
  segmentLength,
  type ModelConfig,
  type PromptIds,
} from '../../model/config.js';
import { RECALL_PAGES_PER_HEAD } from '../../kv/sizing.js';

import { sessionPrompt } from '../../kv/prompt.js';
import type { GpuContext } from '../../gpu/device.js';
import { NO_EXPORT } from './pool.js';
import { slotBytes } from '../../kv/precision.js';
import { ropeTable } from './kernels.js';
import { FOCUS_ENTRIES } from './attention-ops.js';

export interface SessionSizes {
  audioLength: number;
  /** The prompt's token ids the sizes are for (the session's, else the config's). */
  prompt: PromptIds;
  /** Prompt length n = prefix + audio + instruction. */
  promptLength: number;
  /** Text tokens of the prompt per head (prefix, instruction): the pool's first text pages; generated tokens' pages come as they are generated. */
  textTokens: number;
  pageSize: number;
  exported: number;
  /** Rows per block of the prefill's QKV projection, attention and MLP (a multiple of 64), chosen for memory and the binding. */
  prefillChunk: number;
  /** Layers whose prompt K/V the prefill buffers hold at once: 1 for a per-layer prefill, else every layer. */
  prefillKvLayers: number;
  /** Bytes of one prompt K/V element: the pool's (4 f32, 2 f16). */
  kvElementBytes: number;
  /** Instruction rows whose queries the prefill keeps per layer (as many layers as K/V), for summary slots fitted to them; 0: none. */
  instructionQueryRows: number;
  /** Bytes of the prefill buffers, of the largest single buffer, of the decode step's buffers. */
  prefillBytes: number;
  largestBuffer: number;
  decodeBytes: number;
  readbackBytes: number;
  /**
   * Pages (and their bytes) of the worst plan: every audio position of every head on the
   * GPU, with recall headroom, and text up to the cap (maxNewTokens). An upper bound for
   * "will it fit?" questions; a session allocates only the pages its plan needs, at
   * its placement, and text pages as tokens are generated.
   */
  worstPoolPages: number;
  worstPoolBytes: number;
}

export function sessionSizes(
  c: ModelConfig,
  opts: SessionShape,
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number },
  kvMaxBytes?: number,
  kvElementBytes = 4,
): SessionSizes {
  const A = opts.audioLength;
  const prompt = sessionPrompt(c, opts);
  const n = promptLength(prompt, A);
  const P = segmentLength(c);
  const heads = kvHeadCount(c);
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const G = groupSize(c);
  const textTokens = prompt.prefix.length + prompt.instruction.length;
  // Upper bound of kv/sizing.ts poolNeed over all plans: per head, ceil(gpu/P) + ceil(cpuOnly/P)
  // <= ceil(A/P) + 1 (gpu and cpuOnly are disjoint), plus recall headroom <= min(ceil(A/P), cap).
  const worstPoolPages =
    heads *
    (Math.ceil(A / P) +
      1 +
      Math.min(Math.ceil(A / P), RECALL_PAGES_PER_HEAD) +
      Math.ceil((textTokens + opts.maxNewTokens) / P));
  const bytesPerPage = P * slotBytes(c.headDim, kvElementBytes);
  const limit = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const exported = opts.request.decodeHeads.length;
  const prefillChunk = prefillChunkRows(Math.max(QD + 2 * KVD, 2 * I), limit, blockRowFloats(c));
  const m = Math.min(n, prefillChunk);
  // [what, floats] of every buffer whose size grows with the recording (PrefillBuffers, the ring).
  const prefill: [string, number][] = [
    ['prompt hidden states', n * D],
    ['normed block', m * D],
    ['QKV block', m * (QD + 2 * KVD)],
    ['query block', m * QD],
    ['attention output block', m * QD],
    ['gate/up block', m * 2 * I],
    ['SwiGLU block', m * I],
    ['softmax statistics', n * c.numHeads * 2],
    ['prompt ids', n],
    ['prefill scores', heads * A],
  ];
  const perLayerKv = n * KVD;
  const prefillKvLayers = opts.layered ? 1 : c.numLayers;
  const instructionQueryRows = opts.request.instructionQueries ? Math.max(1, prompt.instruction.length) : 0;
  prefill.push(['instruction queries', prefillKvLayers * instructionQueryRows * QD]);
  const prefillBytes = 4 * prefill.reduce((a, [, f]) => a + f, 0) + 2 * kvElementBytes * prefillKvLayers * perLayerKv;
  const readbackBytes = readbackLayout(c, opts, A).end;
  const grown: [string, number][] = [
    ...prefill,
    ["one layer's prefill K", (perLayerKv * kvElementBytes) / 4],
    ['exported decode weights', exported * A],
    ['readback slot', readbackBytes / 4],
  ];
  const [largestWhat, largestFloats] = grown.reduce((a, b) => (b[1] > a[1] ? b : a));
  const largestBuffer = 4 * largestFloats;
  const decodeBytes =
    4 *
      (2 * D +
        2 * QD +
        I +
        c.vocabSize +
        c.numLayers * c.numHeads * 2 +
        exported * A +
        exported * G * c.headDim +
        (n + opts.maxNewTokens) * c.headDim) +
    RING_SLOTS * readbackBytes;
  const worstPoolBytes = worstPoolPages * bytesPerPage;
  const total = prefillBytes + decodeBytes;
  const minPages = heads * (Math.ceil(textTokens / P) + 1);
  if (kvMaxBytes !== undefined && minPages * bytesPerPage > kvMaxBytes) {
    throw new ContextTooLongError(
      minPages * bytesPerPage,
      kvMaxBytes,
      `kvMaxBytes holds ${Math.floor(kvMaxBytes / bytesPerPage)} pages, not even the text's ${minPages - heads} plus one audio page per head`,
    );
  }
  if (largestBuffer > limit) {
    throw new ContextTooLongError(
      total,
      limit,
      `${A} audio tokens need a ${(largestBuffer / 2 ** 20).toFixed(1)} MiB GPU buffer (${largestWhat}), over this device's binding limit`,
      'prompt-binding',
    );
  }
  return {
    audioLength: A,
    prompt,
    promptLength: n,
    textTokens,
    pageSize: P,
    exported,
    prefillChunk,
    prefillKvLayers,
    kvElementBytes,
    instructionQueryRows,
    prefillBytes,
    largestBuffer,
    decodeBytes,
    readbackBytes,
    worstPoolPages,
    worstPoolBytes,
  };
}

/**
 * Most rows one prefill block takes: PREFILL_CHUNK_ROWS, fewer when a block of `width`
 * floats per row would pass `limit`, or the block buffers together (`rowFloats` a row)
 * would pass PREFILL_BLOCK_BYTES.
 */
export function prefillChunkRows(width: number, limit: number, rowFloats = 0): number {
  const byMemory = rowFloats > 0 ? Math.floor(PREFILL_BLOCK_BYTES / (4 * rowFloats) / 64) * 64 : PREFILL_CHUNK_ROWS;
  return Math.max(64, Math.min(PREFILL_CHUNK_ROWS, byMemory, Math.floor(limit / (4 * width) / 64) * 64));
}

/** Floats one prompt row takes in the block buffers: normed row, QKV, query, attention output, gate/up, SwiGLU. */
export function blockRowFloats(c: ModelConfig): number {
  const QD = c.numHeads * c.headDim;
  return c.hiddenSize + QD + 2 * c.numKvHeads * c.headDim + 2 * QD + 3 * c.intermediateSize;
}

/** Rows per prefill block at most: past a few thousand rows a block's matmuls are as efficient as they get. */
export const PREFILL_CHUNK_ROWS = 4096;

/**
 * Bytes the block buffers may take together: at Voxtral-Mini-3B's widths 384 rows (59
 * blocks for 30 minutes), where 4,096-row blocks took 686 MB, more than the hidden states.
 */
export const PREFILL_BLOCK_BYTES = 64 * 2 ** 20;

/** Byte offsets of the parts of one readback slot; `end`: its size. */
export interface ReadbackLayout {
  token: number;
  logits: number;
  weights: number;
  queries: number;
  chunks: number;
  segmentSums: number;
  focus: number;
  end: number;
}

/** What a step reads back: its token, and the logits, weights, queries and chunk choice the session asked for. */
export function readbackLayout(
  c: ModelConfig,
  opts: Pick<SessionShape, 'request' | 'returnLogits'>,
  A: number,
): ReadbackLayout {
  const req = opts.request;
  const R = req.decodeHeads.length;
  const weights = 16 + 4 * (opts.returnLogits ? c.vocabSize : 0);
  const queries = weights + (req.decodeWeights === false ? 0 : 4 * R * A);
  const chunks = queries + (req.decodeQueries ? 4 * R * groupSize(c) * c.headDim : 0);
  const dc = req.decodeChunks;
  const n = dc ? chunkCounts(chunkSpec(c, dc, A)) : { segments: 0, chunks: 0 };
  const segmentSums = chunks + 4 * Math.min(dc?.topChunks ?? 0, n.chunks);
  const focus = segmentSums + (dc?.segmentSums ? 4 * n.segments : 0);
  return {
    token: 0,
    logits: 16,
    weights,
    queries,
    chunks,
    segmentSums,
    focus,
    end: focus + (req.decodeFocus ? 4 * FOCUS_ENTRIES : 0),
  };
}

/** The chunk choice a request asks of a clip of A audio tokens (segments of one pool page). */
export function chunkSpec(c: ModelConfig, dc: NonNullable<ExportRequest['decodeChunks']>, A: number): ChunkSelectSpec {
  return {
    heads: dc.heads,
    audioLength: A,
    segmentLength: segmentLength(c),
    chunkSegments: dc.chunkSegments,
    topChunks: dc.topChunks,
  };
}

/** Buffers of the decode step (but the pool's) and the readback ring: created once per session. */
export class SessionBuffers {
  readonly x: GPUBuffer;
  readonly h: GPUBuffer;
  readonly q: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly act: GPUBuffer;
  readonly logits: GPUBuffer;
  readonly tokenIn: GPUBuffer;
  readonly tokenOut: GPUBuffer;
  readonly step: GPUBuffer;
  readonly ml: GPUBuffer;
  readonly exportW: GPUBuffer;
  readonly exportQ: GPUBuffer;
  readonly rope: GPUBuffer;
  readonly ring: GPUBuffer[];
  /** chunk_select's inputs and outputs, where the request asks for chunks: 1/length per chunk, segment sums, scores, the choice. */
  readonly chunks: {
    spec: ChunkSelectSpec;
    scales: GPUBuffer;
    segSums: GPUBuffer;
    scores: GPUBuffer;
    chosen: GPUBuffer;
  } | null = null;
  /** focus.wgsl's output, where the request asks for word timing's focus: four positions and their weights. */
  readonly focus: { heads: number; top: GPUBuffer } | null = null;
  readonly exportIndex: Uint32Array;
  private readonly all: GPUBuffer[] = [];

  constructor(
    private readonly ctx: GpuContext,
    c: ModelConfig,
    opts: SessionShape,
    readonly sizes: SessionSizes,
  ) {
    const heads = kvHeadCount(c);
    const D = c.hiddenSize;
    const QD = c.numHeads * c.headDim;
    const G = groupSize(c);
    const R = sizes.exported;
    const A = sizes.audioLength;
    this.exportIndex = new Uint32Array(heads).fill(NO_EXPORT);
    opts.request.decodeHeads.forEach((h, i) => {
      if (h < 0 || h >= heads) throw new RangeError(`decode head ${h} outside 0..${heads - 1}`);
      this.exportIndex[h] = i;
    });
    const b = (label: string, floats: number) => {
      const buf = ctx.buffer(label, Math.max(1, floats) * 4);
      this.all.push(buf);
      return buf;
    };
    this.x = b('x', D);
    this.h = b('h', D);
    this.q = b('q', QD);
    this.attn = b('attn', QD);
    this.act = b('act', c.intermediateSize);
    this.logits = b('logits', c.vocabSize);
    this.tokenIn = b('token.in', 1);
    this.tokenOut = b('token.out', 1);
    this.step = b('step', 4 + heads);
    this.ml = b('attn.ml', c.numLayers * c.numHeads * 2);
    this.exportW = b('export.weights', R * A);
    this.exportQ = b('export.queries', R * G * c.headDim);
    const positions = sizes.promptLength + opts.maxNewTokens;
    this.rope = ctx.buffer('rope', positions * c.headDim * 4, undefined, ropeTable(c, positions));
    this.all.push(this.rope);
    const dc = opts.request.decodeChunks;
    if (dc) {
      if (dc.heads < 1 || dc.heads > R)
        throw new RangeError(`decodeChunks sums ${dc.heads} heads, the request exports ${R}`);
      const spec = chunkSpec(c, dc, A);
      const n = chunkCounts(spec);
      const scales = ctx.buffer('chunks.scales', 4 * n.chunks, undefined, chunkScales(spec));
      this.all.push(scales);
      this.chunks = {
        spec,
        scales,
        segSums: b('chunks.segments', n.segments),
        scores: b('chunks.scores', n.chunks),
        chosen: b('chunks.chosen', Math.min(dc.topChunks, n.chunks)),
      };
    }
    const df = opts.request.decodeFocus;
    if (df) {
      if (df.heads < 1 || df.heads > R)
        throw new RangeError(`decodeFocus sums ${df.heads} heads, the request exports ${R}`);
      this.focus = { heads: df.heads, top: b('focus.top', FOCUS_ENTRIES) };
    }
    // Staging buffers: one mapped while the next step, already queued, copies into another (step-ring.ts).
    this.ring = Array.from({ length: RING_SLOTS }, (_, i) => {
      const r = ctx.buffer(`readback.${i}`, sizes.readbackBytes, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      this.all.push(r);
      return r;
    });
  }

  /** One more readback slot, for a loop that runs further ahead of its reads than the ring holds. */
  moreReadback(): GPUBuffer {
    const r = this.ctx.buffer(
      `readback.${this.ring.length}`,
      this.sizes.readbackBytes,
      GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    );
    this.all.push(r);
    return r;
  }

  destroy(): void {
    for (const b of this.all) this.ctx.destroy(b);
    this.all.length = 0;
  }
}

/** Buffers that hold the whole prompt: freed once the pool has been filled. */
export class PrefillBuffers {
  readonly x: GPUBuffer;
  readonly h: GPUBuffer;
  readonly qkv: GPUBuffer;
  readonly q: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly gateUp: GPUBuffer;
  readonly act: GPUBuffer;
  readonly ml: GPUBuffer;
  readonly ids: GPUBuffer;
  readonly scores: GPUBuffer;
  /** Per layer held (as the K/V), the instruction rows' post-RoPE queries [rows, numHeads × headDim]. */
  readonly instructionQ: GPUBuffer;
  readonly instructionQueryRows: number;
  /** Per layer held, its prompt K and V [n, KVD] in the pool's precision (kvElementBytes). */
  readonly k: GPUBuffer[] = [];
  readonly v: GPUBuffer[] = [];
  readonly kvElementBytes: number;
  private readonly all: GPUBuffer[] = [];

  constructor(
    private readonly ctx: GpuContext,
    c: ModelConfig,
    sizes: SessionSizes,
  ) {
    const n = sizes.promptLength;
    const A = sizes.audioLength;
    const QD = c.numHeads * c.headDim;
    const KVD = c.numKvHeads * c.headDim;
    const b = (label: string, floats: number, elementBytes = 4) => {
      const buf = ctx.buffer(`prefill.${label}`, Math.max(1, floats) * elementBytes);
      this.all.push(buf);
      return buf;
    };
    this.kvElementBytes = sizes.kvElementBytes;
    // The residual stream; the audio embeddings are written straight into their rows.
    this.x = b('x', n * c.hiddenSize);
    // One block of rows each, except the hidden states x (every row, across layers).
    const m = Math.min(n, sizes.prefillChunk);
    this.h = b('h', m * c.hiddenSize);
    this.qkv = b('qkv', m * (QD + 2 * KVD));
    this.q = b('q', m * QD);
    this.attn = b('attn', m * QD);
    this.gateUp = b('gate_up', m * 2 * c.intermediateSize);
    this.act = b('act', m * c.intermediateSize);
    this.ml = b('ml', n * c.numHeads * 2);
    this.ids = b('ids', n);
    this.scores = b('scores', kvHeadCount(c) * A);
    this.instructionQueryRows = sizes.instructionQueryRows;
    this.instructionQ = b('instruction_q', sizes.prefillKvLayers * sizes.instructionQueryRows * QD);
    for (let l = 0; l < sizes.prefillKvLayers; l++) {
      this.k.push(b(`k.${l}`, n * KVD, this.kvElementBytes));
      this.v.push(b(`v.${l}`, n * KVD, this.kvElementBytes));
    }
  }

  /** The K and V buffers that hold `layer`'s prompt K/V (one pair serves every layer in a per-layer prefill). */
  kvOf(layer: number): { k: GPUBuffer; v: GPUBuffer } {
    const i = this.heldLayer(layer);
    return { k: this.k[i], v: this.v[i] };
  }

  /** Which of the held layers' slots (K/V, instruction queries) `layer` uses. */
  heldLayer(layer: number): number {
    return this.k.length === 1 ? 0 : layer;
  }

  /** Extra buffers made during prefill (uniforms, gather lists) die with these. */
  adopt(buf: GPUBuffer): GPUBuffer {
    this.all.push(buf);
    return buf;
  }

  destroy(): void {
    for (const b of this.all) this.ctx.destroy(b);
    this.all.length = 0;
  }
}
