/**
 * Backend choice. 'auto' takes WebGPU where a real GPU adapter exists (browser, or Node
 * through Dawn) and the CPU backend otherwise; a software adapter (SwiftShader) is only
 * used when asked for explicitly, because in Node it is unreliable and everywhere it is
 * slower than the CPU backend.
 */
import { NoWebGpuError } from '../errors.js';
import type { ModelConfig } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';
import { CpuBackend } from './cpu/backend.js';
import type { DecoderBackend } from './types.js';

export interface CreateBackendOptions {
  backend?: 'auto' | 'cpu' | 'webgpu';
  kvBudgetBytes?: number;
  /** Called when 'auto' falls back to the CPU, with the reason. */
  onFallback?: (reason: string) => void;
  onCompile?: (fraction: number) => void;
}

export async function createBackend(config: ModelConfig, weights: DecoderWeights, opts: CreateBackendOptions = {}): Promise<DecoderBackend> {
  const want = opts.backend ?? 'auto';
  if (want === 'cpu') return new CpuBackend(config, weights, { kvBudgetBytes: opts.kvBudgetBytes });
  try {
    const gpu = await import('./webgpu/index.js');
    return await gpu.createWebGpuBackend(config, weights, {
      kvBudgetBytes: opts.kvBudgetBytes,
      allowSoftware: want === 'webgpu',
      onCompile: opts.onCompile,
    });
  } catch (e) {
    if (want === 'webgpu') throw e instanceof NoWebGpuError ? e : new NoWebGpuError(e instanceof Error ? e.message : String(e));
    opts.onFallback?.(e instanceof Error ? e.message : String(e));
    return new CpuBackend(config, weights, { kvBudgetBytes: opts.kvBudgetBytes });
  }
}
