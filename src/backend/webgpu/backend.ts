/**
 * The WebGPU backend: the decoder in WGSL kernels over a per-head paged KV pool on the
 * GPU, with placement decided by the shared Residency (the same code the CPU backend
 * uses), so both backends see identical page tables for identical plans.
 */
import { NoWebGpuError } from '../../errors.js';
import { promptLength, segmentLength, teacherForced, type ModelConfig, type PromptIds } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import { GROWTH_PAGES_PER_HEAD, growthOptions } from '../../kv/sizing.js';
import type { DecoderBackend, LayeredPrefill, SessionOptions, WholePrefill } from '../types.js';
import type { PrefillPlan } from '../../kv/plan.js';
import type { KvSource } from '../../kv/residency.js';
import { layeredPrefill, wholePrefill } from '../session.js';
import { shapeSession, type SessionShape } from '../session.js';
import { GpuContext, type AcquireOptions } from '../../gpu/device.js';
import { Kernels, modelConstants } from './kernels.js';
import { PipelineCache } from '../../gpu/pipelines.js';
import { kvElementBytes, slotBytes, type KvPrecision } from '../../kv/precision.js';
import { PrefillBuffers, SessionBuffers, sessionSizes } from './session-buffers.js';
import type { ShaderLoader } from '../../gpu/shader-source.js';
import { WebGpuSessionParts, type WebGpuDecodeSession, type WebGpuEngine } from './decode-session.js';
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
import { isPackedSource, sourceFormats, type PackedWeightSource } from '../../model/packed-source.js';
import { cancellableUpload, settleCreation } from '../cancel.js';
import { TriageKernels } from './triage-ops.js';
import type { ClipTriage } from '../types.js';

export interface WebGpuBackendOptions {
  /** An existing context (shared with other work, or made by a test); default: acquire one. */
  context?: GpuContext;
  acquire?: AcquireOptions;
  /** Cap on the KV pool's bytes; default: whatever the plan needs (the pool is sized from it). */
  kvMaxBytes?: number;
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

export class WebGpuBackend implements DecoderBackend<WebGpuDecodeSession> {
  readonly kind = 'webgpu' as const;
  readonly label: string;
  /** The open session: opening another closes it. */
  private live: WebGpuSessionParts | null = null;
  /** What its sessions use of the backend. */
  private readonly engine: WebGpuEngine;

  /** The triage's kernels, compiled by the first triage. */
  private triageKernels: Promise<TriageKernels> | null = null;

  private constructor(
    readonly config: ModelConfig,
    readonly ctx: GpuContext,
    kernels: Kernels,
    private readonly weights: GpuWeights,
    private readonly options: WebGpuBackendOptions,
    private readonly ownsContext: boolean,
    private readonly cache: PipelineCache,
  ) {
    this.label = ctx.info.label;
    const elementBytes = kvElementBytes(options.kvPrecision ?? 'f32');
    const limits = bindingLimits(ctx, options.maxBindingBytes);
    const page = segmentLength(config) * slotBytes(config.headDim, elementBytes);
    this.engine = {
      ctx,
      config,
      kernels,
      weights,
      elementBytes,
      bindLimit: Math.min(...Object.values(limits)),
      kvMaxBytes: options.kvMaxBytes,
      growth: () => growthOptions(options.kvGrowPages ?? GROWTH_PAGES_PER_HEAD, options.kvMaxBytes, page),
      scoped: (make, what, bytes) => scopedSetup(ctx.device, make, what, bytes),
    };
  }

  /** Acquires the device, compiles every pipeline and uploads the weights. */
  static async create(
    config: ModelConfig,
    weights: DecoderWeights | PackedDecoderWeights | PackedWeightSource,
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
    // A source is streamed into the device by the upload, never held here.
    const packed = 'format' in weights ? weights : packDecoderWeights(config, weights, options.weightFormat ?? 'f32');
    const P = segmentLength(config);
    const loading = Kernels.load(cache, config, P, undefined, options.kvPrecision);
    // Every pipeline is asked for now, so the count the progress reports does not grow.
    const weightKernels = loadWeightKernels(
      cache,
      config,
      modelConstants(config, P, options.kvPrecision),
      loading,
      isPackedSource(packed) ? sourceFormats(packed) : packedFormats(packed),
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
      { signal: options.signal },
    );
    const [kernels, gpuWeights] = await settleCreation(ctx, loading, upload, options.signal, !options.context);
    return new WebGpuBackend(config, ctx, kernels, gpuWeights, options, !options.context, cache);
  }

  /**
   * The memory a session of this length needs, without allocating (for "will it fit?"
   * UIs): the prefill and decode buffers exactly, the KV pool as its worst case
   * (`worstPoolBytes`); the pool a session allocates is its plan's (`poolLayout()`).
   */
  memoryNeed(opts: SessionOptions, layered = false) {
    return this.sizes(shapeSession(this.config, opts, layered).shape);
  }

  private sizes(shape: SessionShape) {
    const limits = bindingLimits(this.ctx, this.options.maxBindingBytes);
    return {
      ...sessionSizes(this.config, shape, limits, this.options.kvMaxBytes, this.engine.elementBytes),
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

  open(opts: SessionOptions): WholePrefill<WebGpuDecodeSession> {
    const parts = this.start(opts, false);
    return wholePrefill(parts);
  }

  openByLayer(opts: SessionOptions): LayeredPrefill<WebGpuDecodeSession> {
    const parts = this.start(opts, true);
    return layeredPrefill({ prefill: (audio, run) => parts.prefillByLayer(audio, run), close: () => parts.close() });
  }

  /**
   * A session whose KV is placed without a prefill (WebGpuSessionParts.placeUnfilled): what
   * the host-time bench runs at lengths a software adapter cannot prefill. Sized as a
   * layered session, so only one layer's prompt K/V is allocated, and never filled.
   */
  openUnfilled(opts: SessionOptions): {
    place(plan: PrefillPlan, rows: KvSource): Promise<WebGpuDecodeSession>;
    close(): void;
  } {
    const parts = this.start(opts, true);
    return { place: (plan, rows) => parts.placeUnfilled(plan, rows), close: () => parts.close() };
  }

  /**
   * Head triage of one clip with the weights on the device (triage.ts): `answer` is the
   * transcript's ids and the stop token, teacher-forced after `prompt`'s instruction.
   * Closes the open session; the next `open` makes a new one.
   */
  async triage(
    audio: Float32Array,
    audioLength: number,
    answer: number[],
    prompt: PromptIds = this.config,
  ): Promise<ClipTriage> {
    if (answer.length === 0) throw new RangeError('no answer tokens to take the CE on');
    const forced = teacherForced(prompt, answer.slice(0, -1));
    const parts = this.start(
      { audioLength, maxNewTokens: 1, request: { decodeHeads: [], prefillQueries: 0 }, prompt: forced },
      true,
    );
    try {
      this.triageKernels ??= TriageKernels.load(
        this.cache,
        this.config,
        modelConstants(this.config, segmentLength(this.config), this.options.kvPrecision),
        [this.weights.lmHead, ...this.weights.layers.flatMap((l) => [l.o, l.down, l.gateUp, l.qkv])].map(
          (m) => m.format,
        ),
      );
      return await parts.triage(await this.triageKernels, audio, answer, promptLength(prompt, audioLength) - 1);
    } finally {
      parts.close();
      this.live = null;
    }
  }

  /** Sizes and allocates a session (ContextTooLongError before any GPU work). */
  private start(opts: SessionOptions, layered: boolean): WebGpuSessionParts {
    this.ctx.check();
    this.live?.close();
    this.live = null;
    const { shape, readouts } = shapeSession(this.config, opts, layered);
    const sizes = this.sizes(shape);
    const c = this.config;
    const {
      value: [buffers, prefill],
      failure: allocation,
    } = this.engine.scoped(
      () => {
        const buffers = new SessionBuffers(this.ctx, c, shape, sizes);
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
    this.live = new WebGpuSessionParts(this.engine, shape, readouts, buffers, prefill, allocation);
    return this.live;
  }

  dispose(): void {
    this.live?.close();
    this.live = null;
    this.weights.destroy();
    if (this.ownsContext) this.ctx.device.destroy();
  }
}
