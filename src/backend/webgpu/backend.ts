/**
 * The WebGPU backend: the decoder in WGSL kernels over a per-head paged KV pool on the
 * GPU, with placement decided by the shared Residency (the same code the CPU backend
 * uses), so both backends see identical page tables for identical plans.
 */
import { ContextTooLongError, NoWebGpuError, OutOfMemoryError } from '../../errors.js';
import { kvHeadCount, segmentLength, type ModelConfig } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import { Residency, liveResidency } from '../../kv/residency.js';
import { poolNeed } from '../../kv/sizing.js';
import type { ResidencyStats, TransferStats } from '../../kv/types.js';
import type { PrefillPlan, StepPlan } from '../../policy/types.js';
import { policyLayout } from '../cpu/prefill.js';
import type { DecoderBackend, PrefillResult, SessionOptions, StepResult } from '../types.js';
import { GpuContext, type AcquireOptions } from './device.js';
import { Kernels } from './kernels.js';
import { PipelineCache } from './pipelines.js';
import { GpuPool, slotBytes } from './pool.js';
import { gatherIntoPool, readPrefillKv, runPrefill } from './prefill.js';
import { PrefillBuffers, SessionBuffers, sessionSizes } from './session.js';
import type { ShaderLoader } from './shader-source.js';
import { DecodeStep } from './step.js';
import { GpuWeights } from './weights.js';

export interface WebGpuBackendOptions {
  /** An existing context (shared with other work, or made by a test); default: acquire one. */
  context?: GpuContext;
  acquire?: AcquireOptions;
  /** Cap on the KV pool's bytes; default: the worst plan's need. */
  kvBudgetBytes?: number;
  /**
   * Cap on one storage binding, below the device's own limit: a KV pool past it is split
   * into shards of whole layers. Tests use it to exercise a sharded pool on any device.
   */
  maxBindingBytes?: number;
  shaderLoader?: ShaderLoader;
  /** Refuse software adapters (SwiftShader, llvmpipe) with NoWebGpuError; default false. */
  requireHardware?: boolean;
  /** Pipeline compilation progress, 0..1. */
  onCompile?: (fraction: number) => void;
}

interface Session {
  opts: SessionOptions;
  buffers: SessionBuffers;
  prefill: PrefillBuffers | null;
  /** Resolves to an error when begin()'s allocations failed (OOM is only known asynchronously). */
  allocation: Promise<Error | null>;
  residency: Residency | null;
  step: DecodeStep;
  nextPos: number;
  steps: number;
  ringIndex: number;
  slots: Int32Array;
  stepState: Uint32Array<ArrayBuffer>;
  tokenIn: Int32Array<ArrayBuffer>;
}

export class WebGpuBackend implements DecoderBackend {
  readonly kind = 'webgpu' as const;
  readonly label: string;
  private session: Session | null = null;
  private counters = { dispatches: 0, submits: 0 };

  private constructor(
    readonly config: ModelConfig,
    readonly ctx: GpuContext,
    private readonly kernels: Kernels,
    private readonly weights: GpuWeights,
    private readonly options: WebGpuBackendOptions,
    private readonly ownsContext: boolean,
  ) {
    this.label = ctx.info.label;
  }

  /** Acquires the device, compiles every pipeline and uploads the weights. */
  static async create(config: ModelConfig, weights: DecoderWeights, options: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
    const ctx = options.context ?? (await GpuContext.acquire(options.acquire));
    if (options.requireHardware && ctx.info.software) {
      if (!options.context) ctx.device.destroy();
      throw new NoWebGpuError(`only a software adapter is available (${ctx.info.label}); the CPU backend is faster`);
    }
    const cache = new PipelineCache(ctx, options.shaderLoader);
    const [kernels, gpuWeights] = await Promise.all([
      Kernels.load(cache, config, segmentLength(config), options.onCompile),
      GpuWeights.upload(ctx, config, weights),
    ]);
    return new WebGpuBackend(config, ctx, kernels, gpuWeights, options, !options.context);
  }

  /** The memory a session of this length needs, without allocating (for "will it fit?" UIs). */
  plan(opts: SessionOptions) {
    const cap = this.options.maxBindingBytes ?? Infinity;
    const { maxStorageBufferBindingSize, maxBufferSize } = this.ctx.limits;
    const limits = { maxStorageBufferBindingSize: Math.min(maxStorageBufferBindingSize, cap), maxBufferSize: Math.min(maxBufferSize, cap) };
    return sessionSizes(this.config, opts, limits, this.options.kvBudgetBytes);
  }

  begin(opts: SessionOptions): void {
    this.ctx.check();
    if (this.session) this.end();
    const sizes = this.plan(opts); // throws ContextTooLongError before any GPU work
    const c = this.config;
    const d = this.ctx.device;
    d.pushErrorScope('out-of-memory');
    d.pushErrorScope('validation');
    let buffers: SessionBuffers | null = null;
    let prefill: PrefillBuffers | null = null;
    let step: DecodeStep | null = null;
    let thrown: unknown = null;
    try {
      buffers = new SessionBuffers(this.ctx, c, opts, sizes);
      prefill = new PrefillBuffers(this.ctx, c, sizes);
      step = new DecodeStep(this.ctx, c, this.kernels, this.weights, buffers, opts.request.decodeHeads, !!opts.request.decodeQueries, !!opts.returnLogits);
    } catch (e) {
      thrown = e;
    }
    const bytes = sizes.prefillBytes + sizes.poolBytes + sizes.decodeBytes;
    const allocation = d.popErrorScope().then(async (validation) => {
      const oom = await d.popErrorScope();
      if (oom) return new OutOfMemoryError(`the KV pool and session buffers for ${opts.audioLength} audio tokens`, bytes) as Error;
      if (validation) return new Error(`WebGPU session setup failed: ${validation.message}`);
      return null;
    });
    if (thrown || !buffers || !prefill || !step) {
      prefill?.destroy();
      buffers?.destroy();
      throw thrown;
    }
    const heads = kvHeadCount(c);
    this.session = {
      opts, buffers, prefill, allocation, residency: null, step,
      nextPos: sizes.promptLength, steps: 0, ringIndex: 0,
      slots: new Int32Array(heads), stepState: new Uint32Array(4 + heads), tokenIn: new Int32Array(1),
    };
  }

  private get s(): Session {
    if (!this.session) throw new Error('no session: call begin() first');
    return this.session;
  }

  async prefill(audioEmbeddings: Float32Array): Promise<PrefillResult> {
    const s = this.s;
    const c = this.config;
    const failed = await s.allocation;
    if (failed) throw failed;
    if (!s.prefill) throw new Error('prefill() may run once per session');
    if (audioEmbeddings.length !== s.opts.audioLength * c.hiddenSize) {
      throw new RangeError(`audio embeddings hold ${audioEmbeddings.length} floats, expected ${s.opts.audioLength} x ${c.hiddenSize}`);
    }
    this.ctx.check();
    const r = await runPrefill(this.ctx, c, this.kernels, this.weights, s.buffers, s.prefill, audioEmbeddings, s.opts.request, !!s.opts.returnLogits);
    this.ctx.check();
    return { token: r.token, logits: r.logits, observation: { layout: policyLayout(c, s.opts.audioLength), scores: r.scores, keys: r.keys } };
  }

  async applyPrefill(plan: PrefillPlan): Promise<TransferStats> {
    const s = this.s;
    const c = this.config;
    const p = s.prefill;
    if (!p) throw new Error('applyPrefill() needs a prefill() first, once');
    const sizes = s.buffers.sizes;
    const A = sizes.audioLength;
    const P = sizes.pageSize;
    const text = [0];
    for (let i = 0; i < c.instruction.length; i++) text.push(1 + A + i);
    const need = poolNeed(plan, P, text.length + s.opts.maxNewTokens);
    const bytesPerPage = P * slotBytes(c.headDim);
    const pool = s.buffers.pool;
    const { shards, numPages, overShard } = pool.residencyShards(need.perHead);
    if (need.total > sizes.capacityPages || overShard !== -1) {
      const where = overShard !== -1 && sizes.shards > 1 ? ` (the pool's shard ${overShard}, layers ${overShard * sizes.layersPerShard}.., is full)` : '';
      throw new ContextTooLongError(need.total * bytesPerPage, sizes.capacityPages * bytesPerPage, `${A} audio tokens under this plan${where}`);
    }
    const residency = new Residency({ heads: kvHeadCount(c), headDim: c.headDim, pageSize: P, numPages, shards, audioStart: 1, audioLength: A }, pool);
    // CPU copies: read back once, only the layers that keep any.
    const cpuLayers = new Set<number>();
    plan.heads.forEach((h, i) => { if (h.cpu.length > 0) cpuLayers.add(Math.floor(i / c.numKvHeads)); });
    const kv = await readPrefillKv(this.ctx, c, p, sizes.promptLength, [...cpuLayers]);
    const hd = c.headDim;
    const kvd = c.numKvHeads * hd;
    const { gathers, transfer } = residency.applyPrefill(plan, text, (head, seqPos, k, kOff, v, vOff) => {
      const src = kv.get(Math.floor(head / c.numKvHeads))!;
      const o = seqPos * kvd + (head % c.numKvHeads) * hd;
      k.set(src.k.subarray(o, o + hd), kOff);
      v.set(src.v.subarray(o, o + hd), vOff);
    });
    gatherIntoPool(this.ctx, c, this.kernels, s.buffers, p, gathers);
    pool.flush(residency);
    // Prefill buffers go as soon as the gather is queued (WebGPU defers the free).
    p.destroy();
    s.prefill = null;
    s.residency = residency;
    this.ctx.check();
    return transfer;
  }

  async step(token: number): Promise<StepResult> {
    const s = this.s;
    const c = this.config;
    const res = s.residency;
    if (!res) throw new Error('step() before applyPrefill()');
    if (!Number.isInteger(token) || token < 0 || token >= c.vocabSize) throw new RangeError(`token ${token} outside vocabulary`);
    this.ctx.check();
    const pos = s.nextPos++;
    res.appendText(pos, s.slots);
    const q = this.ctx.device.queue;
    s.stepState[0] = pos;
    s.stepState.set(s.slots, 4);
    q.writeBuffer(s.buffers.step, 0, s.stepState);
    s.tokenIn[0] = token;
    q.writeBuffer(s.buffers.tokenIn, 0, s.tokenIn);
    s.buffers.pool.flush(res);
    const splits = Math.max(1, Math.ceil(GpuPool.maxPages(res) / this.kernels.pagesPerSplit));
    const ring = s.buffers.ring[s.ringIndex];
    s.ringIndex = (s.ringIndex + 1) % s.buffers.ring.length;
    q.submit([s.step.encode(splits, ring)]);
    this.counters = { dispatches: s.step.dispatchCount, submits: 1 };
    try {
      await ring.mapAsync(GPUMapMode.READ);
    } catch (e) {
      this.ctx.check(); // a lost device explains a failed map: say so with the typed error
      throw e;
    }
    this.ctx.check();
    const data = ring.getMappedRange();
    const L = s.step.layout;
    const next = new Uint32Array(data, L.token, 1)[0];
    const logits = s.opts.returnLogits ? new Float32Array(data.slice(L.logits, L.weights)) : undefined;
    const req = s.opts.request;
    const A = s.opts.audioLength;
    const weights = req.decodeHeads.map((_, i) => new Float32Array(data.slice(L.weights + 4 * i * A, L.weights + 4 * (i + 1) * A)));
    let queries: Float32Array[] | undefined;
    if (req.decodeQueries) {
      const gq = (c.numHeads / c.numKvHeads) * c.headDim;
      queries = req.decodeHeads.map((_, i) => new Float32Array(data.slice(L.queries + 4 * i * gq, L.queries + 4 * (i + 1) * gq)));
    }
    ring.unmap();
    return { token: next, logits, observation: { step: s.steps++, weights, queries } };
  }

  async apply(plan: StepPlan): Promise<TransferStats> {
    // Recalled rows are written with queue.writeBuffer now; positions and tables upload with the next step.
    return liveResidency(this.s.residency, 'apply').apply(plan);
  }

  residency(): ResidencyStats {
    return liveResidency(this.s.residency, 'residency').stats();
  }

  /** The live residency (tests compare page tables with the CPU backend's). */
  residencyState(): Residency | undefined {
    return this.session?.residency ?? undefined;
  }

  stepCounters() {
    return { ...this.counters, buffers: this.ctx.liveBuffers, bindGroups: this.ctx.bindGroupsCreated };
  }

  end(): void {
    const s = this.session;
    if (!s) return;
    s.prefill?.destroy();
    s.step.destroy();
    s.buffers.destroy();
    this.session = null;
  }

  dispose(): void {
    this.end();
    this.weights.destroy();
    if (this.ownsContext) this.ctx.device.destroy();
  }
}
