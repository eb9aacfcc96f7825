/**
 * The CPU backend: the decoder in plain TypeScript over the shared paged pool. It is
 * the numerical reference for the WebGPU backend and a real backend for Node without
 * a GPU (CLI, eval, CI) and browsers without WebGPU. Scratch buffers are allocated
 * once per session, so a decode step allocates nothing but its result arrays.
 */
import { PrefillMemo } from './prefill-memo.js';
import { ContextTooLongError } from '../../errors.js';
import {
  audioStart,
  groupSize,
  kvHeadCount,
  promptLength,
  segmentLength,
  type ModelConfig,
  type PromptIds,
} from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import {
  packDecoderWeights,
  packedViews,
  type ComputeWeights,
  type PackedDecoderWeights,
} from '../../model/packed-weights.js';
import type { WeightFormat } from '../../model/quant.js';
import { Residency } from '../../kv/residency.js';
import { checkPoolLimit, GROWTH_PAGES_PER_HEAD, growthOptions, poolNeed } from '../../kv/sizing.js';
import { kvElementBytes, slotBytes, type KvPrecision } from '../../kv/precision.js';
import type { TransferStats } from '../../kv/types.js';
import type { LayerPrefill, PrefillPlan } from '../../kv/plan.js';
import type {
  ClipTriage,
  DecoderBackend,
  LayeredPrefill,
  LayeredPrefillResult,
  SessionOptions,
  WholePrefill,
} from '../types.js';
import { answerPathTriage } from '../../calibrate/answer-path.js';
import {
  addBias,
  argmax,
  matvec,
  pagedAttention,
  rmsnorm,
  rope,
  ropeFrequencies,
  swiglu,
} from '../../reference/ops.js';
import { audioKeys, prefillLayers, type PrefillOutput } from '../../reference/prefill.js';
import { matrixBytes, matrixRow } from '../../reference/matrix.js';
import { sessionPrompt, summaryPlacement, textPositions } from '../../kv/prompt.js';
import { CpuPageStorage } from './storage.js';
import { LayerPlacement } from './layer-placement.js';
import { layeredPrefill, wholePrefill } from '../session.js';
import { deviceReductions, type CompiledReadouts } from '../readouts.js';
import { shapeSession, type SessionShape } from '../session.js';
import { CpuDecodeSession, type DecodeState } from './decode-session.js';

export interface CpuBackendOptions {
  /** Cap on KV pool bytes; default: whatever the session needs. */
  kvMaxBytes?: number;
  /** What the pool stores keys and values as (kv/precision.ts); default 'f32'. */
  kvPrecision?: KvPrecision;
  /**
   * The weight format the WebGPU backend would store the matrices in ('f32' default,
   * 'f16', 'q4'): the CPU computes with exactly those values, packed once here and
   * dequantised a tile of rows at a time as each product reads them.
   */
  weightFormat?: WeightFormat;
  /** Pages per KV head the pool adds when a shard runs out (text KV on demand); default GROWTH_PAGES_PER_HEAD. */
  kvGrowPages?: number;
}

/** A session from open until its KV is placed: its shape, and the prefill's K/V until then. */
interface Pending {
  shape: SessionShape;
  readouts: CompiledReadouts;
  prompt: PromptIds;
  promptLength: number;
  prefillK?: Float32Array[];
  prefillV?: Float32Array[];
  prefillQ?: Float32Array[];
  prefillToken: number;
  /** The decode session, once the KV is placed. */
  decode?: CpuDecodeSession;
}

export class CpuBackend implements DecoderBackend<CpuDecodeSession> {
  readonly kind = 'cpu' as const;
  readonly label = 'CPU (TypeScript reference decoder)';
  /** The open session: opening another closes it (keeping the memo for it). */
  private live: Pending | null = null;
  private readonly freqs: Float64Array;
  // Per-step scratch, sized from the config once.
  private readonly x: Float32Array;
  private readonly xn: Float32Array;
  private readonly q: Float32Array;
  private readonly k: Float32Array;
  private readonly v: Float32Array;
  private readonly att: Float32Array;
  private readonly tmp: Float32Array;
  private readonly gate: Float32Array;
  private readonly up: Float32Array;
  private readonly logits: Float32Array;
  private readonly slots: Int32Array;
  private attScratch = { scores: new Float64Array(0), acc: new Float64Array(0) };
  /** The last prefill kept for the next policy on the clip, and the KV bytes held (prefill-memo.ts). */
  private readonly memo = new PrefillMemo();

  private readonly weights: ComputeWeights;

  constructor(
    readonly config: ModelConfig,
    weights: DecoderWeights | PackedDecoderWeights,
    private readonly options: CpuBackendOptions = {},
  ) {
    const c = config;
    // Packed weights (a converted folder) keep their own format, and stay packed: an f32
    // copy of Voxtral's q4 decoder would be 15 GiB where the packed one is 2.1 GiB.
    const format = options.weightFormat ?? 'f32';
    this.weights =
      'format' in weights
        ? packedViews(c, weights)
        : format === 'f32'
          ? weights
          : packedViews(c, packDecoderWeights(c, weights, format));
    this.freqs = ropeFrequencies(c.headDim, c.ropeTheta);
    this.x = new Float32Array(c.hiddenSize);
    this.xn = new Float32Array(c.hiddenSize);
    this.q = new Float32Array(c.numHeads * c.headDim);
    this.k = new Float32Array(c.numKvHeads * c.headDim);
    this.v = new Float32Array(c.numKvHeads * c.headDim);
    this.att = new Float32Array(c.numHeads * c.headDim);
    this.tmp = new Float32Array(c.hiddenSize);
    this.gate = new Float32Array(c.intermediateSize);
    this.up = new Float32Array(c.intermediateSize);
    this.logits = new Float32Array(c.vocabSize);
    this.slots = new Int32Array(kvHeadCount(c));
  }

  open(opts: SessionOptions): WholePrefill<CpuDecodeSession> {
    const p = this.start(opts, false);
    return wholePrefill({
      prefill: (audio) => this.prefill(p, audio),
      place: (plan) => this.place(p, plan),
      close: () => this.closeSession(p),
    });
  }

  openByLayer(opts: SessionOptions): LayeredPrefill<CpuDecodeSession> {
    const p = this.start(opts, true);
    return layeredPrefill({
      prefill: (audio, run) => this.prefillByLayer(p, audio, run),
      close: () => this.closeSession(p),
    });
  }

  private start(opts: SessionOptions, layered: boolean): Pending {
    if (this.live) this.closeSession(this.live, true);
    const c = this.config;
    const { shape, readouts } = shapeSession(c, opts, layered);
    const prompt = sessionPrompt(c, opts);
    const n = promptLength(prompt, opts.audioLength);
    // Prefill holds the whole prompt's KV once (one layer's at a time when layered); refuse what could never fit.
    const fullBytes = (layered ? c.numKvHeads : kvHeadCount(c)) * (n + opts.maxNewTokens) * c.headDim * 8;
    if (this.options.kvMaxBytes !== undefined && fullBytes > 4 * this.options.kvMaxBytes) {
      throw new ContextTooLongError(fullBytes, this.options.kvMaxBytes, `prefill of ${opts.audioLength} audio tokens`);
    }
    this.memo.begin();
    const p: Pending = { shape, readouts, prompt, promptLength: n, prefillToken: -1 };
    this.live = p;
    return p;
  }

  /** Frees a session's prefill K/V; the memo stays only for a close with `keepPrefill`. */
  private closeSession(p: Pending, keepPrefill = false): void {
    p.prefillK = p.prefillV = p.prefillQ = undefined;
    p.decode?.release();
    if (this.live !== p) return;
    if (!keepPrefill) this.memo.drop();
    this.live = null;
  }

  /**
   * Bytes of the decoder weights this backend holds, as held: packed bytes for packed
   * matrices (views into one matrix counted once), f32 bytes for f32 ones.
   */
  weightBytes(): number {
    const w = this.weights;
    const seen = new Set<unknown>();
    let n = 0;
    const add = (m: ComputeWeights['embed'] | undefined) => {
      if (!m) return;
      const key = m instanceof Float32Array ? m : m.data;
      if (seen.has(key)) return;
      seen.add(key);
      n += matrixBytes(m);
    };
    add(w.embed);
    add(w.lmHead);
    add(w.norm);
    for (const l of w.layers) for (const m of Object.values(l)) add(m);
    return n;
  }

  /** The KV bytes this session has held, now and at the peak (prefill-memo.ts). */
  kvMemory(): { liveBytes: number; peakBytes: number } {
    return this.memo.kvMemory;
  }

  private hold(bytes: number): void {
    this.memo.hold(bytes);
  }

  private checkEmbeddings(p: Pending, audioEmbeddings: Float32Array): void {
    const N = p.shape.audioLength;
    if (audioEmbeddings.length !== N * this.config.hiddenSize) {
      throw new RangeError(
        `audio embeddings hold ${audioEmbeddings.length} floats, expected ${N} x ${this.config.hiddenSize}`,
      );
    }
  }

  private async prefill(s: Pending, audioEmbeddings: Float32Array) {
    const c = this.config;
    const N = s.shape.audioLength;
    this.checkEmbeddings(s, audioEmbeddings);
    const req = s.shape.request;
    let r = this.memo.find(audioEmbeddings, s.prompt, req.prefillQueries);
    const reused = r !== null;
    if (!r) {
      this.memo.drop(); // free the old one before allocating the new
      r = prefillLayers(c, this.weights, this.freqs, audioEmbeddings, N, req, {
        prompt: s.prompt,
        kvF16: this.options.kvPrecision === 'f16',
      });
      this.memo.keep(audioEmbeddings, s.prompt, r);
    }
    s.prefillK = r.k;
    s.prefillQ = r.instructionQueries;
    s.prefillV = r.v;
    const last = r.hidden.subarray((s.promptLength - 1) * c.hiddenSize, s.promptLength * c.hiddenSize);
    const token = this.head(last);
    s.prefillToken = token;
    return {
      token,
      logits: s.shape.returnLogits ? Float32Array.from(this.logits) : undefined,
      observation: {
        layout: r.layout,
        // Copies: a policy may keep or modify its scores, and the memo serves the next one.
        scores: r.scores.get(req.prefillQueries)!.map((a) => Float32Array.from(a)),
        keys: req.prefillKeys ? audioKeys(c, r.k, N, audioStart(s.prompt)) : undefined,
      },
      reused,
    };
  }

  private async place(s: Pending, plan: PrefillPlan): Promise<CpuDecodeSession> {
    const c = this.config;
    const N = s.shape.audioLength;
    const P = segmentLength(c);
    const text = textPositions(s.prompt, N);
    // Generated tokens' pages come as they are generated (Residency grows the pool).
    const need = poolNeed(plan, P, text.length);
    const elementBytes = kvElementBytes(this.options.kvPrecision ?? 'f32');
    const bytesPerPage = P * slotBytes(c.headDim, elementBytes);
    checkPoolLimit(need.total * bytesPerPage, this.options.kvMaxBytes, `${N} audio tokens under this policy`);
    const storage = new CpuPageStorage(c.headDim, elementBytes === 2, P, (b) => this.hold(b));
    this.hold(storage.addShard(0, c.numLayers, 0, need.total * P));
    const residency = new Residency(
      {
        heads: kvHeadCount(c),
        headDim: c.headDim,
        pageSize: P,
        numPages: need.total,
        kvElementBytes: elementBytes,
        audioStart: audioStart(s.prompt),
        audioLength: N,
        ...this.growth(bytesPerPage),
      },
      storage,
    );
    const kvd = c.numKvHeads * c.headDim;
    const hd = c.headDim;
    const pk = s.prefillK!;
    const pv = s.prefillV!;
    const rowOf = (head: number, pos: number) => pos * kvd + (head % c.numKvHeads) * hd;
    const layerOf = (head: number) => Math.floor(head / c.numKvHeads);
    const pq = s.prefillQ!;
    const { gathers, transfer } = residency.applyPrefill(
      plan,
      text,
      (head, pos, k, kOff, v, vOff) => {
        const l = layerOf(head);
        const o = rowOf(head, pos);
        k.set(pk[l].subarray(o, o + hd), kOff);
        v.set(pv[l].subarray(o, o + hd), vOff);
      },
      summaryPlacement(c, plan.fitting, (l) => pq[l]),
    );
    for (const g of gathers) {
      const l = layerOf(g.head);
      for (let i = 0; i < g.slots.length; i++) {
        const o = rowOf(g.head, g.seqPositions[i]);
        storage.writeRows(g.slots[i], 1, pk[l].subarray(o, o + hd), pv[l].subarray(o, o + hd));
      }
    }
    s.prefillK = undefined;
    s.prefillV = undefined;
    s.prefillQ = undefined;
    return this.startDecode(s, residency, storage, transfer, s.prefillToken);
  }

  private async prefillByLayer(
    s: Pending,
    audioEmbeddings: Float32Array,
    run: LayerPrefill,
  ): Promise<LayeredPrefillResult<CpuDecodeSession>> {
    const c = this.config;
    const N = s.shape.audioLength;
    this.checkEmbeddings(s, audioEmbeddings);
    const req = s.shape.request;
    const kvd = c.numKvHeads * c.headDim;
    const placement = new LayerPlacement(c, N, run, {
      elementBytes: kvElementBytes(this.options.kvPrecision ?? 'f32'),
      growth: this.growth(segmentLength(c) * slotBytes(c.headDim, kvElementBytes(this.options.kvPrecision ?? 'f32'))),
      prefillQueries: req.prefillQueries,
      prefillKeys: !!req.prefillKeys,
      fitting: run.fitting,
      kvMaxBytes: this.options.kvMaxBytes,
      hold: (bytes) => this.hold(bytes),
      prompt: s.prompt,
    });
    const place = placement.place.bind(placement);
    let hidden: Float32Array;
    const memo = this.memo.find(audioEmbeddings, s.prompt, req.prefillQueries);
    if (memo) {
      for (let l = 0; l < c.numLayers; l++) place(l, memo.k[l], memo.v[l], memo.scores, memo.instructionQueries[l]);
      hidden = memo.hidden;
    } else {
      this.memo.drop();
      // Keep every layer's prompt K/V only for a next policy on the same clip (the eval's shared prefill).
      const keep = !!s.shape.reusePrefill;
      const layerBytes = 8 * s.promptLength * kvd;
      if (!keep) this.hold(layerBytes);
      const out = prefillLayers(c, this.weights, this.freqs, audioEmbeddings, N, req, {
        prompt: s.prompt,
        keepKv: keep,
        kvF16: this.options.kvPrecision === 'f16',
        onLayer: (l, k, v, scores, iq) => {
          if (keep) this.hold(layerBytes);
          place(l, k, v, scores, iq);
        },
      });
      if (keep) this.memo.keep(audioEmbeddings, s.prompt, out, true);
      else this.hold(-layerBytes);
      hidden = out.hidden;
    }
    const plan = run.finish();
    const token = this.head(hidden.subarray((s.promptLength - 1) * c.hiddenSize, s.promptLength * c.hiddenSize));
    const logits = s.shape.returnLogits ? Float32Array.from(this.logits) : undefined;
    const transfer = { bytesToGpu: 0, bytesToCpu: placement.bytesToCpu, recalledPositions: 0, releasedPositions: 0 };
    const session = this.startDecode(s, placement.residency, placement.storage, transfer, token);
    return { token, logits, plan, session };
  }

  /** How the pool grows for text on demand: pages per head at once, and the byte cap (kvMaxBytes) in pages. */
  private growth(bytesPerPage: number): { growPages: number; maxPages?: number } {
    return growthOptions(this.options.kvGrowPages ?? GROWTH_PAGES_PER_HEAD, this.options.kvMaxBytes, bytesPerPage);
  }

  private startDecode(
    p: Pending,
    residency: Residency,
    storage: CpuPageStorage,
    placed: TransferStats,
    first: number,
  ): CpuDecodeSession {
    const c = this.config;
    const maxSlots =
      Math.max(...Array.from({ length: kvHeadCount(c) }, (_, h) => residency.pageTable(h).length)) * residency.pageSize;
    this.attScratch = { scores: new Float64Array(maxSlots + 4 * residency.pageSize), acc: new Float64Array(c.headDim) };
    const state: DecodeState = {
      residency,
      storage,
      request: p.shape.request,
      audioStart: audioStart(p.prompt),
      audioLength: p.shape.audioLength,
      nextPos: p.promptLength,
      returnLogits: !!p.shape.returnLogits,
    };
    p.decode = new CpuDecodeSession(
      (token) => this.decode(state, token),
      state,
      p.readouts,
      placed,
      first,
      (keep) => this.closeSession(p, keep),
    );
    return p.decode;
  }

  /**
   * One decode step of a session: feeds `token` at its next position, appends its KV, and
   * returns the greedy next token with the raw readings its request exports.
   */
  private decode(s: DecodeState, token: number) {
    const c = this.config;
    const res = s.residency;
    const st = s.storage;
    if (token < 0 || token >= c.vocabSize) throw new RangeError(`token ${token} outside vocabulary`);
    const pos = s.nextPos++;
    const D = c.hiddenSize;
    const hd = c.headDim;
    const g = groupSize(c);
    const req = s.request;
    const N = s.audioLength;
    // The chunk choice and the focus read the weights even when they are not handed over.
    const weights =
      req.decodeWeights === false && !req.decodeChunks && !req.decodeFocus
        ? []
        : req.decodeHeads.map(() => new Float32Array(N));
    const queries = req.decodeQueries ? req.decodeHeads.map(() => new Float32Array(g * hd)) : undefined;
    const wantIndex = new Map(req.decodeHeads.map((h, i) => [h, i]));
    res.appendText(pos, this.slots);
    this.ensureScratch(res);
    matrixRow(this.weights.embed, token, D, this.x);
    for (let l = 0; l < c.numLayers; l++) {
      const w = this.weights.layers[l];
      rmsnorm(this.x, w.attnNorm, c.rmsNormEps, D, 1, this.xn);
      matvec(w.q, c.numHeads * hd, D, this.xn, this.q);
      matvec(w.k, c.numKvHeads * hd, D, this.xn, this.k);
      matvec(w.v, c.numKvHeads * hd, D, this.xn, this.v);
      addBias(this.q, w.qBias, c.numHeads * hd);
      addBias(this.k, w.kBias, c.numKvHeads * hd);
      addBias(this.v, w.vBias, c.numKvHeads * hd);
      rope(this.q, 0, c.numHeads, hd, pos, this.freqs);
      rope(this.k, 0, c.numKvHeads, hd, pos, this.freqs);
      const shard = st.ofLayer(l);
      for (let kh = 0; kh < c.numKvHeads; kh++) {
        const head = l * c.numKvHeads + kh;
        st.writeRows(
          this.slots[head],
          1,
          this.k.subarray(kh * hd, (kh + 1) * hd),
          this.v.subarray(kh * hd, (kh + 1) * hd),
        );
        const pages = res.pageTable(head);
        const wi = wantIndex.get(head);
        pagedAttention(
          this.q,
          kh * g * hd,
          g,
          hd,
          { pages, pageCount: pages.length },
          res.pageSize,
          shard.k,
          shard.v,
          res.positions,
          this.att,
          kh * g * hd,
          wi === undefined ? undefined : weights[wi],
          s.audioStart,
          this.attScratch,
          shard.firstSlot,
        );
        if (queries && wi !== undefined) queries[wi].set(this.q.subarray(kh * g * hd, (kh + 1) * g * hd));
      }
      matvec(w.o, D, c.numHeads * hd, this.att, this.tmp);
      for (let i = 0; i < D; i++) this.x[i] += this.tmp[i];
      rmsnorm(this.x, w.mlpNorm, c.rmsNormEps, D, 1, this.xn);
      matvec(w.gate, c.intermediateSize, D, this.xn, this.gate);
      matvec(w.up, c.intermediateSize, D, this.xn, this.up);
      swiglu(this.gate, this.up, this.gate);
      matvec(w.down, D, c.intermediateSize, this.gate, this.tmp);
      for (let i = 0; i < D; i++) this.x[i] += this.tmp[i];
    }
    const next = this.head(this.x);
    // The chunks and focus as the GPU's kernels choose them: the same f32 sums, the same order.
    const reduced = deviceReductions(weights, req, N, segmentLength(c));
    return {
      token: next,
      logits: s.returnLogits ? Float32Array.from(this.logits) : undefined,
      readings: { weights: req.decodeWeights === false ? [] : weights, queries, ...reduced },
    };
  }

  async triage(audio: Float32Array, audioLength: number, answer: number[], prompt?: PromptIds): Promise<ClipTriage> {
    this.live = null;
    return answerPathTriage(this.config, this.weights, audio, audioLength, answer, prompt);
  }

  dispose(): void {
    this.live = null;
    this.memo.clear();
  }

  /** Final norm + lm_head into this.logits; returns the greedy token. */
  private head(hidden: Float32Array): number {
    const c = this.config;
    rmsnorm(hidden, this.weights.norm, c.rmsNormEps, c.hiddenSize, 1, this.xn);
    matvec(this.weights.lmHead, c.vocabSize, c.hiddenSize, this.xn, this.logits);
    return argmax(this.logits);
  }

  private ensureScratch(res: Residency): void {
    let max = 0;
    for (let h = 0; h < res.pages.heads; h++) max = Math.max(max, res.pageTable(h).length);
    const need = max * res.pageSize;
    if (this.attScratch.scores.length < need) this.attScratch.scores = new Float64Array(need * 2);
  }
}
