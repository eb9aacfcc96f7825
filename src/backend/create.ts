/**
 * Backend choice. 'auto' takes WebGPU where a real GPU adapter exists (browser, or Node
 * through Dawn) and the CPU backend otherwise; a software adapter (SwiftShader) is only
 * used when asked for explicitly, because in Node it is unreliable and everywhere it is
 * slower than the CPU backend.
 */
import { CancelledError, DeviceLostError, ModelTooBigError, NoWebGpuError, WnwError } from '../errors.js';
import type { ModelConfig } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';
import { CpuBackend } from './cpu/backend.js';
import type { DecoderBackend } from './types.js';
import type { KvPrecision } from '../kv/precision.js';
import type { WeightFormat } from '../model/quant.js';
import type { PackedDecoderWeights } from '../model/packed-weights.js';
import { isPackedSource, readPackedSource, type PackedWeightSource } from '../model/packed-source.js';
import type { DeviceLimits } from './webgpu/fit.js';

export interface CreateBackendOptions {
  backend?: 'auto' | 'cpu' | 'webgpu';
  kvMaxBytes?: number;
  /** What the KV pool stores keys and values as; default 'f32'. */
  kvPrecision?: KvPrecision;
  /** What the weight matrices are stored in ('f32' default, 'f16', 'q4'); both backends use the same values. */
  weightFormat?: WeightFormat;
  /** Called when 'auto' falls back to the CPU, with the reason. */
  onFallback?: (reason: string) => void;
  /** WebGPU: pipelines ready, of those asked for. */
  onCompile?: (compiled: number, total: number) => void;
  /** WebGPU: bytes of the weights written to GPU buffers, of their total. */
  onUpload?: (loaded: number, total: number) => void;
  /** WebGPU: cancels the upload and compilation (a CancelledError; every GPU buffer made is freed). */
  signal?: AbortSignal;
}

/**
 * Where the decoder will run, decided before any weight is read: the CPU, or a WebGPU
 * adapter whose limits the loader judges first (`refuseUnfit`); the device is made from it
 * once the weights are in.
 */
export type BackendTarget =
  | { kind: 'cpu' }
  | {
      kind: 'webgpu';
      adapter: GPUAdapter;
      limits: DeviceLimits;
      label: string;
      /** Asked for by name: a software adapter is accepted, a failure is not the CPU. */ explicit: boolean;
    };

/**
 * 'auto' without a usable hardware adapter is the CPU (said through `onFallback`); 'webgpu'
 * without an adapter is a NoWebGpuError, now rather than after the weights are read.
 */
export async function chooseBackend(
  opts: Pick<CreateBackendOptions, 'backend' | 'onFallback'> = {},
): Promise<BackendTarget> {
  const want = opts.backend ?? 'auto';
  if (want === 'cpu') return { kind: 'cpu' };
  try {
    const { describeAdapter, requestGpuAdapter } = await import('../gpu/device.js');
    const adapter = await requestGpuAdapter();
    const { label, software, name } = describeAdapter(adapter);
    if (software && want === 'auto')
      throw new NoWebGpuError(`only a software adapter (${name}) is here, and the CPU backend is faster than it`, '');
    const { maxStorageBufferBindingSize, maxBufferSize } = adapter.limits;
    return {
      kind: 'webgpu',
      adapter,
      limits: { maxStorageBufferBindingSize, maxBufferSize },
      label,
      explicit: want === 'webgpu',
    };
  } catch (e) {
    if (want === 'webgpu')
      throw e instanceof WnwError ? e : new NoWebGpuError(e instanceof Error ? e.message : String(e));
    // The reason alone, one flat sentence: NoWebGpuError's advice is for a page that asked for WebGPU.
    opts.onFallback?.(e instanceof NoWebGpuError ? e.detail : e instanceof Error ? e.message : String(e));
    return { kind: 'cpu' };
  }
}

/**
 * The decoder backend on `target` (default: `chooseBackend(opts)`). Weights given as a
 * source (src/model/packed-source.ts) are streamed into the GPU; the CPU, which computes
 * from memory, reads them whole first.
 */
export async function createBackend(
  config: ModelConfig,
  weights: DecoderWeights | PackedDecoderWeights | PackedWeightSource,
  opts: CreateBackendOptions = {},
  target?: BackendTarget,
): Promise<DecoderBackend> {
  const cpuOptions = {
    kvMaxBytes: opts.kvMaxBytes,
    kvPrecision: opts.kvPrecision,
    weightFormat: opts.weightFormat,
  };
  const on = target ?? (await chooseBackend(opts));
  const inMemory = async () =>
    isPackedSource(weights) ? await readPackedSource(weights, { signal: opts.signal }) : weights;
  if (on.kind === 'cpu') return new CpuBackend(config, await inMemory(), cpuOptions);
  try {
    const gpu = await import('./webgpu/index.js');
    return await gpu.createWebGpuBackend(config, weights, {
      kvMaxBytes: opts.kvMaxBytes,
      kvPrecision: opts.kvPrecision,
      weightFormat: opts.weightFormat,
      acquire: { adapter: on.adapter },
      allowSoftware: on.explicit,
      onCompile: opts.onCompile,
      onUpload: opts.onUpload,
      signal: opts.signal,
    });
  } catch (e) {
    // Weights the GPU cannot bind need another format, not the CPU (a 3B model there is unusably slow): said, not worked around.
    // A cancel or a lost device is the caller's to see, not a reason to fall back.
    if (e instanceof ModelTooBigError || e instanceof CancelledError || e instanceof DeviceLostError) throw e;
    if (on.explicit) throw e instanceof WnwError ? e : new NoWebGpuError(e instanceof Error ? e.message : String(e));
    opts.onFallback?.(e instanceof Error ? e.message : String(e));
    return new CpuBackend(config, await inMemory(), cpuOptions);
  }
}
