/**
 * Backend choice. 'auto' takes WebGPU where a real GPU adapter exists (browser, or Node
 * through Dawn) and the CPU backend otherwise; a software adapter (SwiftShader) is only
 * used when asked for explicitly, because in Node it is unreliable and everywhere it is
 * slower than the CPU backend.
 */
import { NoWebGpuError } from '../errors.js';
import type { ModelConfig } from '../model/config.js';
import type { DecoderWeights } from '../model/weights.js';
import { isNode, nodeBuiltin } from '../model/files.js';
import { CpuBackend } from './cpu/backend.js';
import type { DecoderBackend } from './types.js';
import type { KvPrecision } from '../kv/precision.js';
import type { WeightFormat } from '../model/quant.js';
import type { PackedDecoderWeights } from '../model/packed-weights.js';

export interface CreateBackendOptions {
  backend?: 'auto' | 'cpu' | 'webgpu';
  kvBudgetBytes?: number;
  /** What the KV pool stores keys and values as; default 'f32'. */
  kvPrecision?: KvPrecision;
  /** What the weight matrices are stored in ('f32' default, 'f16', 'q4'); both backends use the same values. */
  weightFormat?: WeightFormat;
  /** Called when 'auto' falls back to the CPU, with the reason. */
  onFallback?: (reason: string) => void;
  onCompile?: (fraction: number) => void;
}

/**
 * On Linux, Dawn needs a Vulkan driver manifest; without one it only prints warnings
 * and finds no adapter, so 'auto' skips it up front (and stays quiet).
 */
async function nodeVulkanMissing(): Promise<string | null> {
  if (!isNode()) return null;
  const g = globalThis as unknown as { process: { platform: string; env: Record<string, string | undefined> } };
  if (g.process.platform !== 'linux' || g.process.env.VK_ICD_FILENAMES || g.process.env.VK_DRIVER_FILES) return null;
  const fs = await nodeBuiltin<typeof import('node:fs')>('node:fs');
  const dirs = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d'];
  const found = dirs.some((d) => fs.existsSync(d) && fs.readdirSync(d).some((f) => f.endsWith('.json')));
  return found ? null : 'no Vulkan driver is installed (no ICD manifest in /usr/share/vulkan/icd.d)';
}

export async function createBackend(config: ModelConfig, weights: DecoderWeights | PackedDecoderWeights, opts: CreateBackendOptions = {}): Promise<DecoderBackend> {
  const want = opts.backend ?? 'auto';
  const cpuOptions = { kvBudgetBytes: opts.kvBudgetBytes, kvPrecision: opts.kvPrecision, weightFormat: opts.weightFormat };
  if (want === 'cpu') return new CpuBackend(config, weights, cpuOptions);
  const missing = want === 'auto' ? await nodeVulkanMissing() : null;
  if (missing) {
    opts.onFallback?.(missing);
    return new CpuBackend(config, weights, cpuOptions);
  }
  try {
    const gpu = await import('./webgpu/index.js');
    return await gpu.createWebGpuBackend(config, weights, {
      kvBudgetBytes: opts.kvBudgetBytes,
      kvPrecision: opts.kvPrecision,
      weightFormat: opts.weightFormat,
      allowSoftware: want === 'webgpu',
      onCompile: opts.onCompile,
    });
  } catch (e) {
    if (want === 'webgpu') throw e instanceof NoWebGpuError ? e : new NoWebGpuError(e instanceof Error ? e.message : String(e));
    opts.onFallback?.(e instanceof Error ? e.message : String(e));
    return new CpuBackend(config, weights, cpuOptions);
  }
}
