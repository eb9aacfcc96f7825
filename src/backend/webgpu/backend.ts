/**
 * The WebGPU backend: the decoder in WGSL kernels over a per-head paged KV pool on the
 * GPU, with placement decided by the shared Residency (the same code the CPU backend
 * uses), so both backends see identical page tables for identical plans.
 */
import { ContextTooLongError, NoWebGpuError, OutOfMemoryError } from '../../errors.js';
import { audioStart, kvHeadCount, segmentLength, type ModelConfig } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import { Residency, liveResidency } from '../../kv/residency.js';
import { checkPoolBudget, GROWTH_PAGES_PER_HEAD, growthOptions, poolNeed } from '../../kv/sizing.js';
import type { ResidencyStats, TransferStats } from '../../kv/types.js';
import type { LayerPrefill, PrefillPlan, StepPlan } from '../../kv/plan.js';
import { policyLayout, textPositions } from '../prompt.js';
import type {
  DecoderBackend,
  LayeredPrefillResult,
  PrefillResult,
  SessionOptions,
  StepCounters,
  StepResult,
} from '../types.js';
import { GpuContext, type AcquireOptions } from '../../gpu/device.js';
import { Kernels, modelConstants } from './kernels.js';
import { PipelineCache } from '../../gpu/pipelines.js';
import { GpuPool } from './pool.js';
import { kvElementBytes, slotBytes, type KvPrecision } from '../../kv/precision.js';
import { poolLayout, residencyShards, shardedLayout, type PoolLayout } from './pool-layout.js';
import { placePlan, runPrefill } from './prefill.js';
import { LayerPlacer } from './layered.js';
import { PrefillBuffers, SessionBuffers, sessionSizes } from './session.js';
import type { ShaderLoader } from '../../gpu/shader-source.js';
import { DecodeStep } from './step.js';
import { StepRing } from './step-ring.js';
import { queueStep } from './step-submit.js';
import type { Session } from './session-state.js';
import { scopedSetup } from '../../gpu/scoped.js';
import { GpuWeights } from './weights.js';
import { bindingLimit, bindingLimits } from './weight-formats.js';
import { refuseUnfit } from './fit.js';
import { loadWeightKernels } from './weight-kernels.js';
import {
  packDecoderWeights,
  packedFormats,
  type PackedDecoderWeights,
  type WeightBytes,
} from '../../model/packed-weights.js';
import type { WeightFormat } from '../../model/quant.js';
import { cancellableUpload, settleCreation } from '../cancel.js';

export interface WebGpuBackendOptions {
  /** An existing context (shared with other work, or made by a test); default: acquire one. */
  context?: GpuContext;
  acquire?: AcquireOptions;
  /** Cap on the KV pool's bytes; default: whatever the plan needs (the pool is sized from it). */
  kvBudgetBytes?: number;
  /** What the KV pool stores keys and values as (kv/precision.ts); default 'f32'. */
  kvPrecision?: KvPrecision;
  /**
   * Cap on one storage binding, below the device's own limit: a KV pool past it is split
   * into shards of whole layers. Tests use it to exercise a sharded pool on any device.
   */
  maxBindingBytes?: number;
  shaderLoader?: ShaderLoader;
  /**
   * The format the weight matrices are stored and read in (src/model/quant.ts): 'f32' (the
   * reference model, default), 'f16' or group-wise 'q4'. Weights given already packed keep
   * their own format. The CPU backend given the same format computes with the same values.
   */
  weightFormat?: WeightFormat;
  /** Pages per KV head the pool adds when a shard runs out (text KV on demand); default GROWTH_PAGES_PER_HEAD. */
  kvGrowPages?: number;
  /** Refuse software adapters (SwiftShader, llvmpipe) with NoWebGpuError; default false. */
  requireHardware?: boolean;
  /** Pipeline compilation progress: pipelines ready, of those asked for. */
  onCompile?: (compiled: number, total: number) => void;
  /** Weight upload progress: bytes written to GPU buffers, of the packed weights' total. */
  onUpload?: (loaded: number, total: number) => void;
  /** Cancels the upload and compilation: a CancelledError, every buffer made so far freed. */
  signal?: AbortSignal;
}

export class WebGpuBackend implements DecoderBackend {
  readonly kind = 'webgpu' as const;
  readonly label: string;
  private session: Session | null = null;
  private counters: Omit<StepCounters, 'buffers' | 'bindGroups' | 'poolGrowths'> = { dispatches: 0, submits: 0 };

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
  static async create(
    config: ModelConfig,
    weights: DecoderWeights | PackedDecoderWeights,
    options: WebGpuBackendOptions = {},
  ): Promise<WebGpuBackend> {
    const ctx = options.context ?? (await GpuContext.acquire(options.acquire));
    if (options.requireHardware && ctx.info.software) {
      if (!options.context) ctx.device.destroy();
      throw new NoWebGpuError(`only a software adapter is available (${ctx.info.label}); the CPU backend is faster`);
    }
    // loadTranscriber judged the adapter before reading weights; this backstop serves callers that bring their own.
    try {
      refuseUnfit(
        config,
        'format' in weights ? weights.format : (options.weightFormat ?? 'f32'),
        false,
        { limits: bindingLimits(ctx, options.maxBindingBytes) },
        `the decoder of ${config.name} on ${ctx.info.label}`,
      );
    } catch (e) {
      if (!options.context) ctx.device.destroy();
      throw e;
    }
    const cache = new PipelineCache(ctx, options.shaderLoader);
    cache.onCompiled = options.onCompile;
    const packed = 'format' in weights ? weights : packDecoderWeights(config, weights, options.weightFormat ?? 'f32');
    const P = segmentLength(config);
    const loading = Kernels.load(cache, config, P, undefined, options.kvPrecision);
    // Every pipeline is asked for now, so the count the progress reports does not grow.
    const weightKernels = loadWeightKernels(
      cache,
      config,
      modelConstants(config, P, options.kvPrecision),
      loading,
      packedFormats(packed),
    );
    weightKernels.catch(() => {}); // awaited by the upload; a failed upload must not leave it unhandled
    options.onCompile?.(0, cache.size);
    const onUpload = cancellableUpload(options.signal, options.onUpload);
    // Matrices upload while the pipelines of their formats compile.
    const upload = GpuWeights.upload(
      ctx,
      config,
      packed,
      bindingLimit(ctx, options.maxBindingBytes),
      weightKernels,
      onUpload,
    );
    const [kernels, gpuWeights] = await settleCreation(ctx, loading, upload, options.signal, !options.context);
    return new WebGpuBackend(config, ctx, kernels, gpuWeights, options, !options.context);
  }

  /**
   * The memory a session of this length needs, without allocating (for "will it fit?"
   * UIs): the prefill and decode buffers exactly, the KV pool as its worst case
   * (`worstPoolBytes`); the pool a session allocates is its plan's (see poolInfo()).
   */
  plan(opts: SessionOptions) {
    return {
      ...sessionSizes(this.config, opts, this.limits(), this.options.kvBudgetBytes, this.elementBytes),
      weightBytes: this.weights.bytes,
    };
  }

  /** The decoder weights on the device: bytes in total, per storage format, embedding and head. */
  weightMemory(): WeightBytes & { embedParts: number; lmHeadParts: number } {
    return {
      ...this.weights.memory,
      embedParts: this.weights.embed.parts.length,
      lmHeadParts: this.weights.lmHead.parts.length,
    };
  }

  /** The live session's KV pool: its pages, shards and bytes (null before applyPrefill). */
  poolInfo(): PoolLayout | null {
    return this.session?.pool?.layout ?? null;
  }

  private get elementBytes(): number {
    return kvElementBytes(this.options.kvPrecision ?? 'f32');
  }

  private limits() {
    return bindingLimits(this.ctx, this.options.maxBindingBytes);
  }

  /** `make` inside error scopes (gpu/scoped.ts): its out-of-memory or validation failure, typed, resolves later. */
  private scoped<T>(make: () => T, what: string, bytes: number): { value: T; failure: Promise<Error | null> } {
    return scopedSetup(this.ctx.device, make, what, bytes);
  }

  begin(opts: SessionOptions): void {
    this.ctx.check();
    if (this.session) this.end();
    const sizes = this.plan(opts); // throws ContextTooLongError before any GPU work
    const c = this.config;
    const {
      value: [buffers, prefill],
      failure: allocation,
    } = this.scoped(
      () => {
        const buffers = new SessionBuffers(this.ctx, c, opts, sizes);
        try {
          return [buffers, new PrefillBuffers(this.ctx, c, sizes)] as const;
        } catch (e) {
          buffers.destroy();
          throw e;
        }
      },
      `the prefill and decode buffers for ${opts.audioLength} audio tokens`,
      sizes.prefillBytes + sizes.decodeBytes,
    );
    const heads = kvHeadCount(c);
    this.session = {
      opts,
      buffers,
      prefill,
      allocation,
      residency: null,
      pool: null,
      step: null,
      stepGeneration: 0,
      nextPos: sizes.promptLength,
      steps: 0,
      ring: new StepRing(buffers.ring),
      submitted: 0,
      reader: null,
      pendingBytes: 0,
      poolSubmits: 0,
      slots: new Int32Array(heads),
      stepState: new Uint32Array(4 + heads),
      tokenIn: new Int32Array(1),
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
    if (s.buffers.sizes.prefillKvLayers !== c.numLayers)
      throw new Error('a session begun with { layered: true } prefills with prefillByLayer()');
    if (audioEmbeddings.length !== s.opts.audioLength * c.hiddenSize) {
      throw new RangeError(
        `audio embeddings hold ${audioEmbeddings.length} floats, expected ${s.opts.audioLength} x ${c.hiddenSize}`,
      );
    }
    this.ctx.check();
    const r = await runPrefill(
      this.ctx,
      c,
      this.kernels,
      this.weights,
      s.buffers,
      s.prefill,
      audioEmbeddings,
      s.opts.request,
      !!s.opts.returnLogits,
    );
    this.ctx.check();
    return {
      token: r.token,
      logits: r.logits,
      observation: {
        layout: policyLayout(c, s.opts.audioLength, s.buffers.sizes.prompt),
        scores: r.scores,
        keys: r.keys,
      },
    };
  }

  async applyPrefill(plan: PrefillPlan): Promise<TransferStats> {
    const s = this.s;
    const c = this.config;
    const p = s.prefill;
    if (!p) throw new Error('applyPrefill() needs a prefill() first, once');
    const sizes = s.buffers.sizes;
    const A = sizes.audioLength;
    const P = sizes.pageSize;
    const text = textPositions(sizes.prompt, A);
    // The pool holds what this plan keeps (and its recall headroom) and the prompt's text, not
    // the worst case; generated tokens' pages come as they are generated (Residency grows it).
    const need = poolNeed(plan, P, text.length);
    const bytesPerPage = P * slotBytes(c.headDim, this.elementBytes);
    checkPoolBudget(need.total * bytesPerPage, this.options.kvBudgetBytes, `${A} audio tokens under this plan`);
    // Shards are packed with room for the text cap, so growing never passes a binding.
    const capText = Math.ceil((text.length + s.opts.maxNewTokens) / P) - Math.ceil(text.length / P);
    const layout = poolLayout(c, need.perHead, P, this.bindLimit, this.elementBytes, capText);
    const pool = await this.makePool(layout, `the KV pool of this plan (${need.total} pages)`);
    const residency = new Residency(
      {
        heads: kvHeadCount(c),
        headDim: c.headDim,
        pageSize: P,
        numPages: layout.capacityPages,
        shards: residencyShards(c, layout),
        kvElementBytes: layout.elementBytes,
        audioStart: audioStart(sizes.prompt),
        audioLength: A,
        ...this.growth(),
      },
      pool,
    );
    const transfer = await placePlan(
      this.ctx,
      c,
      this.kernels,
      pool,
      p,
      sizes.promptLength,
      residency,
      plan,
      text,
      s.opts.request,
    );
    // Prefill buffers go as soon as the gather is queued (WebGPU defers the free).
    p.destroy();
    s.prefill = null;
    s.residency = residency;
    this.ctx.check();
    return transfer;
  }

  async prefillByLayer(audioEmbeddings: Float32Array, run: LayerPrefill): Promise<LayeredPrefillResult> {
    const s = this.s;
    const c = this.config;
    const failed = await s.allocation;
    if (failed) throw failed;
    const p = s.prefill;
    if (!p) throw new Error('prefillByLayer() may run once per session');
    const sizes = s.buffers.sizes;
    if (sizes.prefillKvLayers !== 1 && c.numLayers > 1)
      throw new Error('prefillByLayer() needs begin({ layered: true })');
    const A = sizes.audioLength;
    if (audioEmbeddings.length !== A * c.hiddenSize) {
      throw new RangeError(`audio embeddings hold ${audioEmbeddings.length} floats, expected ${A} x ${c.hiddenSize}`);
    }
    this.ctx.check();
    const limit = this.bindLimit;
    const req = s.opts.request;
    const placer = new LayerPlacer({
      ctx: this.ctx,
      config: c,
      kernels: this.kernels,
      prefill: p,
      sizes,
      request: req,
      run,
      elementBytes: this.elementBytes,
      limit,
      budget: this.options.kvBudgetBytes,
      growth: this.growth(),
      scoped: (make, what, bytes) => this.scoped(make, what, bytes),
    });
    let r: Awaited<ReturnType<typeof runPrefill>>;
    let plan: PrefillPlan;
    let pool: GpuPool;
    try {
      r = await runPrefill(
        this.ctx,
        c,
        this.kernels,
        this.weights,
        s.buffers,
        p,
        audioEmbeddings,
        req,
        !!s.opts.returnLogits,
        (l) => placer.place(l),
      );
      plan = run.finish();
      const layout = shardedLayout(c, placer.shards, sizes.pageSize, limit, this.elementBytes);
      pool = await this.makePool(layout, `the KV pool's tables for ${layout.capacityPages} pages`, placer.shardBuffers);
    } catch (e) {
      placer.destroy();
      throw e;
    }
    const residency = placer.residency;
    residency.attach(pool);
    pool.flush(residency);
    p.destroy();
    s.prefill = null;
    s.residency = residency;
    this.ctx.check();
    return {
      token: r.token,
      logits: r.logits,
      plan,
      transfer: { bytesToGpu: 0, bytesToCpu: placer.bytesToCpu, recalledPositions: 0, releasedPositions: 0 },
    };
  }

  private get bindLimit(): number {
    return Math.min(...Object.values(this.limits()));
  }

  /** How the pool grows for text on demand: pages per head at once, and the KV budget in pages. */
  private growth(): { growPages: number; maxPages?: number } {
    const page = segmentLength(this.config) * slotBytes(this.config.headDim, this.elementBytes);
    return growthOptions(this.options.kvGrowPages ?? GROWTH_PAGES_PER_HEAD, this.options.kvBudgetBytes, page);
  }

  /** The pool of `layout` (with shard buffers made already, or new ones) and the decode step over it, on the session. */
  private async makePool(
    layout: PoolLayout,
    what: string,
    shardBuffers?: { k: GPUBuffer; v: GPUBuffer }[],
  ): Promise<GpuPool> {
    const s = this.s;
    const c = this.config;
    const {
      value: [pool, step],
      failure,
    } = this.scoped(
      () => {
        const pool = new GpuPool(this.ctx, c, layout, s.buffers.exportIndex, shardBuffers, this.bindLimit);
        try {
          return [pool, this.decodeStep(pool)] as const;
        } catch (e) {
          pool.destroy();
          throw e;
        }
      },
      what,
      layout.bytes,
    );
    const failed = await failure;
    if (failed) {
      step.destroy();
      pool.destroy();
      throw failed;
    }
    s.pool = pool;
    s.step = step;
    s.stepGeneration = pool.generation;
    return pool;
  }

  /** The decode step over `pool`, reading back what the session's request asks. */
  private decodeStep(pool: GpuPool): DecodeStep {
    const s = this.s;
    const req = s.opts.request;
    return new DecodeStep(
      this.ctx,
      this.config,
      this.kernels,
      this.weights,
      s.buffers,
      pool,
      req.decodeHeads,
      !!req.decodeQueries,
      !!s.opts.returnLogits,
      req.decodeWeights !== false,
      !!req.decodeChunks?.segmentSums,
    );
  }

  async step(token: number): Promise<StepResult> {
    this.submitStep(token);
    return this.readStep();
  }

  /**
   * Queues one decode step: the next position's uniforms, the pool's changed tables and one
   * submit. Fed `token`, or with null the greedy token the step before it wrote on the GPU.
   * Nothing here waits for the GPU: a loop may queue step t + 1 before it reads step t.
   */
  submitStep(token: number | null): void {
    queueStep(this.ctx, this.config, this.kernels, this.s, token, (pool) => this.decodeStep(pool));
  }

  /** The oldest queued step's token, logits and exported attention (maps its readback slot). */
  async readStep(): Promise<StepResult> {
    const s = this.s;
    const reader = s.reader;
    if (!reader) throw new Error('readStep() before any submitStep()');
    let read;
    try {
      read = await s.ring.oldest();
    } catch (e) {
      this.ctx.check(); // a lost device explains a failed map: say so with the typed error
      throw e;
    }
    this.ctx.check();
    const { slot, counters } = read.step;
    // Every DecodeStep of a session has the same readback layout: the latest reads any slot.
    const r = reader.read(slot.getMappedRange());
    slot.unmap();
    this.counters = { ...counters, cpuWaits: read.waited };
    return { token: r.token, logits: r.logits, observation: { step: s.steps++, ...r.observation } };
  }

  async apply(plan: StepPlan): Promise<TransferStats> {
    // Recalled rows are written with queue.writeBuffer now; positions and tables upload with the next step.
    const moved = await liveResidency(this.s.residency, 'apply').apply(plan);
    this.s.pendingBytes += moved.bytesToGpu;
    return moved;
  }

  residency(): ResidencyStats {
    return liveResidency(this.s.residency, 'residency').stats();
  }

  /** The live residency (tests compare page tables with the CPU backend's). */
  residencyState(): Residency | undefined {
    return this.session?.residency ?? undefined;
  }

  stepCounters() {
    return {
      ...this.counters,
      buffers: this.ctx.liveBuffers,
      bindGroups: this.ctx.bindGroupsCreated,
      poolGrowths: this.session?.residency?.growths ?? 0,
    };
  }

  end(): void {
    const s = this.session;
    if (!s) return;
    s.ring.clear();
    s.prefill?.destroy();
    s.step?.destroy();
    s.pool?.destroy();
    s.buffers.destroy();
    this.session = null;
  }

  dispose(): void {
    this.end();
    this.weights.destroy();
    if (this.ownsContext) this.ctx.device.destroy();
  }
}
