/**
 * What a model folder holds, read from its config alone (before any weight is read), and
 * whether its decoder weights plus the KV plan for the clip fit this device: the WebGPU
 * adapter's buffer limits and the memory the browser reports (the judgement itself is
 * src/backend/webgpu/fit.ts, which the loader uses too).
 */
import { parseConfig, type ModelConfig } from '../model/config.js';
// checkFit and ModelLoadError from their modules, not the entry: a value import of index.ts would put the
// engine, which main.ts loads lazily, into the page's bundle.
import { audioTokensOf, checkFit, sureMemoryBytes, type FitDevice } from '../backend/webgpu/fit.js';
import { defaultTowerFormat, towerBytes, type TowerBytes } from '../encoder/sizing.js';
import { parseWhisperEncoderConfig, type WhisperEncoderConfig } from '../encoder/whisper-config.js';
import { ModelLoadError } from '../errors.js';
import { findOnnxAudioEncoder } from '../model/hf/onnx-audio.js';
import { joinModelPath, readJson } from '../model/files.js';
import type { Json } from '../model/families/types.js';
import { readHfConfig } from '../model/hf/load.js';
import { configLayout, decoderFormat } from '../model/loader.js';
import { readPackedMarker } from '../model/packed-folder.js';
import type { FitVerdict, KvPrecision, WeightFormat } from '../index.js';
import { decoderWeightBytes, type DeviceLimits } from '../research.js';

export type { FitVerdict };

export interface ModelSummary {
  /** "qwen2_audio (Hugging Face)", "wnw (own layout)", with "converted" for packed folders. */
  family: string;
  config: ModelConfig;
  /** What the decoder's matrices are stored in on the device. */
  weightFormat: WeightFormat;
  weightBytes: number;
  tied: boolean;
  /**
   * A Hugging Face folder's audio tower where it is the route (no ONNX audio encoder beside
   * it): its phase's bytes in each format, for the encode phase of the verdict.
   */
  audioTower?: (format: WeightFormat) => TowerBytes;
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
    return {
      family: 'wnw (own layout)',
      config,
      weightFormat,
      weightBytes: decoderWeightBytes(config, weightFormat).total,
      tied: false,
    };
  }
  const info = await readHfConfig(base, json);
  const marker = await readPackedMarker(base);
  const weightFormat = decoderFormat(marker, requested);
  const tied = info.tiedEmbeddings;
  const onnx = info.family.onnx ? await findOnnxAudioEncoder(base) : undefined;
  const towerConfig = onnx
    ? undefined
    : towerConfigOf(() => parseWhisperEncoderConfig(info.family.audioConfig(json), file, info.family.encoder));
  return {
    family: `${info.family.modelType} (Hugging Face${marker ? `, converted to ${marker.format}` : ''})`,
    config: info.config,
    weightFormat,
    weightBytes: decoderWeightBytes(info.config, weightFormat, tied).total,
    tied,
    ...(towerConfig
      ? { audioTower: (f: WeightFormat) => towerBytes(towerConfig, info.family.encoder, info.config.hiddenSize, f) }
      : {}),
  };
}

/** The tower's config where audio_config states it; a config that does not is the loader's to refuse, and the verdict then judges the decoder alone. */
function towerConfigOf(parse: () => WhisperEncoderConfig): WhisperEncoderConfig | undefined {
  try {
    return parse();
  } catch (e) {
    if (e instanceof ModelLoadError) return undefined;
    throw e;
  }
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
  // The tower runs on the GPU only beside the WebGPU decoder, in the format the route would choose.
  const towerOf = device.limits ? s.audioTower : undefined;
  const format =
    towerOf &&
    defaultTowerFormat(
      s.weightFormat,
      (f) => s.weightBytes + towerOf(f).weightBytes + towerOf(f).batchBytes,
      sureMemoryBytes(device),
    ).format;
  const audioTower = towerOf && format ? towerOf(format) : undefined;
  return checkFit(
    s.config,
    {
      weightFormat: s.weightFormat,
      tied: s.tied,
      audioTokens,
      kvPrecision: clip.kvPrecision,
      budget: clip.budget,
      ...(audioTower ? { audioTower } : {}),
    },
    device,
  );
}

/** The adapter's per-buffer limits, or null without WebGPU or an adapter (the CPU backend runs then). */
export async function adapterLimits(
  gpu: GPU | undefined = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu,
): Promise<DeviceLimits | null> {
  try {
    const adapter = await gpu?.requestAdapter();
    if (!adapter) return null;
    return {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    };
  } catch {
    return null;
  }
}
