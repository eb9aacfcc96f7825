/**
 * What a model folder holds, read from its config alone (before any weight is read), and
 * whether its decoder weights plus the KV plan for the clip fit this device: the WebGPU
 * adapter's buffer limits and the memory the browser reports (the judgement itself is
 * src/backend/webgpu/fit.ts, which the loader uses too).
 */
import { parseConfig, type ModelConfig } from '../model/config.js';
import { audioTokensOf, checkFit, type DeviceLimits, type FitDevice, type FitVerdict } from '../backend/webgpu/fit.js';
import { joinModelPath, readJson } from '../model/files.js';
import type { Json } from '../model/families/types.js';
import { readHfConfig } from '../model/hf/load.js';
import { configLayout, decoderFormat } from '../model/loader.js';
import { readPackedMarker } from '../model/packed-folder.js';
import { decoderWeightBytes } from '../model/packed-weights.js';
import type { WeightFormat } from '../model/quant.js';
import type { KvPrecision } from '../kv/precision.js';

export type { FitVerdict };

export interface ModelSummary {
  /** "qwen2_audio (Hugging Face)", "wnw (own layout)", with "converted" for packed folders. */
  family: string;
  config: ModelConfig;
  /** What the decoder's matrices are stored in on the device. */
  weightFormat: WeightFormat;
  weightBytes: number;
  tied: boolean;
}

/**
 * Reads config.json (and the converted-folder marker): family, shapes and decoder weight
 * bytes, in the format the loader will store them in (src/model/loader.ts decides both).
 */
export async function summarizeModel(base: string, requested: WeightFormat = 'f32'): Promise<ModelSummary> {
  const file = joinModelPath(base, 'config.json');
  const json = (await readJson(file)) as Json;
  if (configLayout(json, file) === 'own') {
    const config = parseConfig(json, file);
    const weightFormat = decoderFormat(null, requested);
    return { family: 'wnw (own layout)', config, weightFormat, weightBytes: decoderWeightBytes(config, weightFormat).total, tied: false };
  }
  const info = await readHfConfig(base, json);
  const marker = await readPackedMarker(base);
  const weightFormat = decoderFormat(marker, requested);
  const tied = info.tiedEmbeddings;
  return {
    family: `${info.family.modelType} (Hugging Face${marker ? `, converted to ${marker.format}` : ''})`,
    config: info.config,
    weightFormat,
    weightBytes: decoderWeightBytes(info.config, weightFormat, tied).total,
    tied,
  };
}

export interface ClipContext {
  seconds: number;
  kvPrecision: KvPrecision;
  /** r_GPU of the run's policy; 1 for the full cache. */
  budget: number;
}

/**
 * The verdict for a clip on this device: the model's weights in their format plus the KV
 * plan for the clip's audio tokens (src/backend/webgpu/fit.ts), against the WebGPU
 * adapter's limits (null where the CPU backend runs) and the memory the browser reports.
 */
export function clipFit(s: ModelSummary, clip: ClipContext, device: FitDevice): FitVerdict {
  const audioTokens = audioTokensOf(s.config, clip.seconds);
  return checkFit(s.config, { weightFormat: s.weightFormat, tied: s.tied, audioTokens, kvPrecision: clip.kvPrecision, budget: clip.budget }, device);
}

/** The adapter's per-buffer limits, or null without WebGPU or an adapter (the CPU backend runs then). */
export async function adapterLimits(gpu: GPU | undefined = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu): Promise<DeviceLimits | null> {
  try {
    const adapter = await gpu?.requestAdapter();
    if (!adapter) return null;
    return { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize, maxBufferSize: adapter.limits.maxBufferSize };
  } catch {
    return null;
  }
}
