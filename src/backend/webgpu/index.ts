/** The WebGPU backend's public surface (loaded lazily by backend/create.ts). */
import type { ModelConfig } from '../../model/config.js';
import type { DecoderWeights } from '../../model/weights.js';
import type { PackedDecoderWeights } from '../../model/packed-weights.js';
import type { PackedWeightSource } from '../../model/packed-source.js';
import { WebGpuBackend, type WebGpuBackendOptions } from './backend.js';

export { WebGpuBackend, type WebGpuBackendOptions } from './backend.js';
export { GpuContext, type GpuInfo, type AcquireOptions } from '../../gpu/device.js';
export { PipelineCache } from '../../gpu/pipelines.js';
export { defaultShaderLoader, type ShaderLoader } from '../../gpu/shader-source.js';
export { benchWebGpu, type WebGpuBench } from './bench.js';

export interface CreateWebGpuOptions extends Omit<WebGpuBackendOptions, 'requireHardware'> {
  /** Accept a software adapter (SwiftShader); otherwise it fails with NoWebGpuError. */
  allowSoftware?: boolean;
}

export function createWebGpuBackend(
  config: ModelConfig,
  weights: DecoderWeights | PackedDecoderWeights | PackedWeightSource,
  opts: CreateWebGpuOptions = {},
): Promise<WebGpuBackend> {
  const { allowSoftware, ...rest } = opts;
  return WebGpuBackend.create(config, weights, { ...rest, requireHardware: !allowSoftware });
}
