/**
 * The CPU backend: the decoder in plain TypeScript over the shared paged pool. It is
 * the numerical reference for the WebGPU backend and a real backend for Node without
 * a GPU (CLI, eval, CI) and browsers without WebGPU. Scratch buffers are allocated
 * once per session, so a decode step allocates nothing but its result arrays.
 */
import { ContextTooLongError } from '../../errors.js';
import { groupSize, kvHeadCount, segmentLength, type ModelConfig } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import { Residency, liveResidency, type PageStorage } from '../../kv/residency.js';
import { poolNeed } from '../../kv/sizing.js';
import { kvElementBytes, roundF16, slotBytes, type KvPrecision } from '../../kv/precision.js';
import type { ResidencyStats, TransferStats } from '../../kv/types.js';
import type { PrefillPlan, StepPlan } from '../../policy/types.js';
import type { DecoderBackend, PrefillResult, SessionOptions, StepResult } from '../types.js';
import { argmax, matvec, pagedAttention, rmsnorm, rope, ropeFrequencies, swiglu } from './ops.js';
import { audioKeys, prefillLayers, type PrefillOutput } from './prefill.js';

/** Windows scored in every prefill so that one prefill serves every policy (SnapKV's w = 32, all rows). */
const SHARED_WINDOWS = [32, Infinity];

export interface CpuBackendOptions {
  /** Cap on KV pool bytes; default: whatever the session needs. */
  kvBudgetBytes?: number;
  /** What the pool stores keys and values as (kv/precision.ts); default 'f32'. */
  kvPrecision?: KvPrecision;
}

/** The pool's K/V in f32 arrays; with f16 every stored value is rounded as the GPU's packing rounds it. */
class CpuPageStorage implements PageStorage {
  constructor(readonly k: Float32Array, readonly v: Float32Array, private readonly headDim: number, private readonly f16: boolean) {}
  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    const n = count * this.headDim;
    const at = slot * this.headDim;
    if (this.f16) {
      roundF16(k, n, this.k, at);
      roundF16(v, n, this.v, at);
      return;
    }
    this.k.set(k.subarray(0, n), at);
    this.v.set(v.subarray(0, n), at);
  }
  syncPositions(): void {
    // Attention reads Residency.positions directly.
  }
}

interface Session {
  opts: SessionOptions;
  promptLength: number;
  nextPos: number;
  steps: number;
  prefillK?: Float32Array[];
  prefillV?: Float32Array[];
  residency?: Residency;
  storage?: CpuPageStorage;
}

export class CpuBackend implements DecoderBackend {
  readonly kind = 'cpu' as const;
  readonly label = 'CPU (TypeScript reference decoder)';
  private session: Session | null = null;
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
  /**
   * The last prefill, keyed by the embeddings array: evaluation runs many policies on
   * one clip, and the prefill (the same for every policy) is most of a CPU run's time.
   */
  private memo: { embeddings: Float32Array; out: PrefillOutput } | null = null;

  constructor(readonly config: ModelConfig, private readonly weights: DecoderWeights, private readonly options: CpuBackendOptions = {}) {
    const c = config;
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

  begin(opts: SessionOptions): void {
    const c = this.config;
    const promptLength = 1 + opts.audioLength + c.instruction.length;
    const fullBytes = kvHeadCount(c) * (promptLength + opts.maxNewTokens) * c.headDim * 8;
    if (this.options.kvBudgetBytes !== undefined && fullBytes > 4 * this.options.kvBudgetBytes) {
      // Prefill holds the whole prompt's KV once; refuse what could never fit.
      throw new ContextTooLongError(fullBytes, this.options.kvBudgetBytes, `prefill of ${opts.audioLength} audio tokens`);
    }
    this.session = { opts, promptLength, nextPos: promptLength, steps: 0 };
  }

  private get s(): Session {
    if (!this.session) throw new Error('no session: call begin() first');
    return this.session;
  }

  async prefill(audioEmbeddings: Float32Array): Promise<PrefillResult> {
    const s = this.s;
    const c = this.config;
    const N = s.opts.audioLength;
    if (audioEmbeddings.length !== N * c.hiddenSize) {
      throw new RangeError(`audio embeddings hold ${audioEmbeddings.length} floats, expected ${N} x ${c.hiddenSize}`);
    }
    const req = s.opts.request;
    let r = this.memo?.embeddings === audioEmbeddings && this.memo.out.scores.has(req.prefillQueries) ? this.memo.out : null;
    if (!r) {
      this.memo = null; // free the old one before allocating the new
      r = prefillLayers(c, this.weights, this.freqs, audioEmbeddings, N, req, { windows: [...SHARED_WINDOWS, c.instruction.length] });
      this.memo = { embeddings: audioEmbeddings, out: r };
    }
    s.prefillK = r.k;
    s.prefillV = r.v;
    const last = r.hidden.subarray((s.promptLength - 1) * c.hiddenSize, s.promptLength * c.hiddenSize);
    const token = this.head(last);
    return {
      token,
      logits: s.opts.returnLogits ? Float32Array.from(this.logits) : undefined,
      observation: {
        layout: r.layout,
        // Copies: a policy may keep or modify its scores, and the memo serves the next one.
        scores: r.scores.get(req.prefillQueries)!.map((a) => Float32Array.from(a)),
        keys: req.prefillKeys ? audioKeys(c, r.k, N) : undefined,
      },
    };
  }

  async applyPrefill(plan: PrefillPlan): Promise<TransferStats> {
    const s = this.s;
    const c = this.config;
    const N = s.opts.audioLength;
    if (!s.prefillK || !s.prefillV) throw new Error('applyPrefill() before prefill()');
    const P = segmentLength(c);
    const text = [0];
    for (let i = 0; i < c.instruction.length; i++) text.push(1 + N + i);
    const need = poolNeed(plan, P, text.length + s.opts.maxNewTokens);
    const elementBytes = kvElementBytes(this.options.kvPrecision ?? 'f32');
    const bytesPerPage = P * slotBytes(c.headDim, elementBytes);
    if (this.options.kvBudgetBytes !== undefined && need.total * bytesPerPage > this.options.kvBudgetBytes) {
      throw new ContextTooLongError(need.total * bytesPerPage, this.options.kvBudgetBytes, `${N} audio tokens under this policy`);
    }
    const storage = new CpuPageStorage(new Float32Array(need.total * P * c.headDim), new Float32Array(need.total * P * c.headDim), c.headDim, elementBytes === 2);
    const residency = new Residency(
      { heads: kvHeadCount(c), headDim: c.headDim, pageSize: P, numPages: need.total, kvElementBytes: elementBytes, audioStart: 1, audioLength: N },
      storage,
    );
    const kvd = c.numKvHeads * c.headDim;
    const hd = c.headDim;
    const pk = s.prefillK;
    const pv = s.prefillV;
    const rowOf = (head: number, pos: number) => pos * kvd + (head % c.numKvHeads) * hd;
    const layerOf = (head: number) => Math.floor(head / c.numKvHeads);
    const { gathers, transfer } = residency.applyPrefill(plan, text, (head, pos, k, kOff, v, vOff) => {
      const l = layerOf(head);
      const o = rowOf(head, pos);
      k.set(pk[l].subarray(o, o + hd), kOff);
      v.set(pv[l].subarray(o, o + hd), vOff);
    });
    for (const g of gathers) {
      const l = layerOf(g.head);
      for (let i = 0; i < g.slots.length; i++) {
        const o = rowOf(g.head, g.seqPositions[i]);
        storage.writeRows(g.slots[i], 1, pk[l].subarray(o, o + hd), pv[l].subarray(o, o + hd));
      }
    }
    s.prefillK = undefined;
    s.prefillV = undefined;
    s.residency = residency;
    s.storage = storage;
    const maxSlots = Math.max(...Array.from({ length: kvHeadCount(c) }, (_, h) => residency.pageTable(h).length)) * P;
    this.attScratch = { scores: new Float64Array(maxSlots + 4 * P), acc: new Float64Array(c.headDim) };
    return transfer;
  }

  async step(token: number): Promise<StepResult> {
    const s = this.s;
    const c = this.config;
    const res = s.residency;
    const st = s.storage;
    if (!res || !st) throw new Error('step() before applyPrefill()');
    if (token < 0 || token >= c.vocabSize) throw new RangeError(`token ${token} outside vocabulary`);
    const pos = s.nextPos++;
    const D = c.hiddenSize;
    const hd = c.headDim;
    const g = groupSize(c);
    const req = s.opts.request;
    const N = s.opts.audioLength;
    const weights = req.decodeWeights === false ? [] : req.decodeHeads.map(() => new Float32Array(N));
    const queries = req.decodeQueries ? req.decodeHeads.map(() => new Float32Array(g * hd)) : undefined;
    const wantIndex = new Map(req.decodeHeads.map((h, i) => [h, i]));
    res.appendText(pos, this.slots);
    this.ensureScratch(res);
    this.x.set(this.weights.embed.subarray(token * D, (token + 1) * D));
    for (let l = 0; l < c.numLayers; l++) {
      const w = this.weights.layers[l];
      rmsnorm(this.x, w.attnNorm, c.rmsNormEps, D, 1, this.xn);
      matvec(w.q, c.numHeads * hd, D, this.xn, this.q);
      matvec(w.k, c.numKvHeads * hd, D, this.xn, this.k);
      matvec(w.v, c.numKvHeads * hd, D, this.xn, this.v);
      rope(this.q, 0, c.numHeads, hd, pos, this.freqs);
      rope(this.k, 0, c.numKvHeads, hd, pos, this.freqs);
      for (let kh = 0; kh < c.numKvHeads; kh++) {
        const head = l * c.numKvHeads + kh;
        st.writeRows(this.slots[head], 1, this.k.subarray(kh * hd, (kh + 1) * hd), this.v.subarray(kh * hd, (kh + 1) * hd));
        const pages = res.pageTable(head);
        const wi = wantIndex.get(head);
        pagedAttention(
          this.q, kh * g * hd, g, hd, { pages, pageCount: pages.length }, res.pageSize,
          st.k, st.v, res.positions, this.att, kh * g * hd,
          wi === undefined ? undefined : weights[wi], 1, this.attScratch,
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
    const step = s.steps++;
    return {
      token: next,
      logits: s.opts.returnLogits ? Float32Array.from(this.logits) : undefined,
      observation: { step, weights, queries },
    };
  }

  async apply(plan: StepPlan): Promise<TransferStats> {
    return liveResidency(this.s.residency, 'apply').apply(plan);
  }

  residency(): ResidencyStats {
    return liveResidency(this.s.residency, 'residency').stats();
  }

  /** The live residency (tests and the tide chart read page tables through it). */
  residencyState(): Residency | undefined {
    return this.session?.residency;
  }

  stepCounters() {
    return { dispatches: 0, submits: 0, buffers: 0, bindGroups: 0 };
  }

  end(keepPrefill = false): void {
    this.session = null;
    if (!keepPrefill) this.memo = null;
  }

  dispose(): void {
    this.session = null;
    this.memo = null;
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
    for (let h = 0; h < res.pool.heads; h++) max = Math.max(max, res.pageTable(h).length);
    const need = max * res.pageSize;
    if (this.attScratch.scores.length < need) this.attScratch.scores = new Float64Array(need * 2);
  }
}

