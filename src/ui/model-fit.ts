/**
 * What a model folder holds, read from its config alone (before any weight is read), and
 * whether its decoder weights plus a full KV cache for the clip fit the memory this
 * device reports. WebGPU reports no memory size, so the only figure a page has is
 * `navigator.deviceMemory`: GiB rounded down to a power of two and capped (at 8 or more,
 * by browser), so the device has at least that and, below the cap, less than twice it.
 * Where neither bound decides, the verdict is left open rather than guessed.
 */
import { kvHeadCount, parseConfig, type ModelConfig } from '../model/config.js';
import { joinModelPath, readJson } from '../model/files.js';
import type { Json } from '../model/families/types.js';
import { readHfConfig } from '../model/hf/load.js';
import { readPackedMarker } from '../model/packed-folder.js';
import { decoderWeightBytes } from '../model/packed-weights.js';
import type { WeightFormat } from '../model/quant.js';
import { kvElementBytes, slotBytes, type KvPrecision } from '../kv/precision.js';
import { formatBytes } from './readouts.js';

export interface ModelSummary {
  /** "qwen2_audio (Hugging Face)", "wnw (own layout)", with "converted" for packed folders. */
  family: string;
  config: ModelConfig;
  /** What the decoder's matrices are stored in on the device. */
  weightFormat: WeightFormat;
  weightBytes: number;
  tied: boolean;
}

/** Reads config.json (and the converted-folder marker): family, shapes and decoder weight bytes. */
export async function summarizeModel(base: string, requested: WeightFormat = 'f32'): Promise<ModelSummary> {
  const json = (await readJson(joinModelPath(base, 'config.json'))) as Json;
  if (typeof json['model_type'] !== 'string') {
    const config = parseConfig(json, joinModelPath(base, 'config.json'));
    return { family: 'wnw (own layout)', config, weightFormat: 'f32', weightBytes: decoderWeightBytes(config, 'f32').total, tied: false };
  }
  const info = await readHfConfig(base, json);
  const marker = await readPackedMarker(base);
  const weightFormat = marker?.format ?? requested;
  const tied = info.tiedEmbeddings;
  return {
    family: `${info.family.modelType} (Hugging Face${marker ? `, converted to ${marker.format}` : ''})`,
    config: info.config,
    weightFormat,
    weightBytes: decoderWeightBytes(info.config, weightFormat, tied).total,
    tied,
  };
}

/** Bytes of a full KV cache for `seconds` of audio plus `textTokens` of prompt and transcript. */
export function fullKvBytes(c: ModelConfig, seconds: number, precision: KvPrecision, textTokens = 256): number {
  const tokens = Math.ceil(seconds * c.audio.tokensPerSecond) + textTokens;
  return kvHeadCount(c) * tokens * slotBytes(c.headDim, kvElementBytes(precision));
}

export interface FitVerdict {
  needBytes: number;
  /** Memory the browser reports, or null when it reports none below its cap. */
  availableBytes: number | null;
  /** null: cannot be told on this device. */
  fits: boolean | null;
  text: string;
}

/** The lowest cap any browser puts on `deviceMemory`: below it the value bounds the memory from above too. */
export const DEVICE_MEMORY_CAP_GIB = 8;

export function fitVerdict(weightBytes: number, kvBytes: number, deviceMemoryGiB: number | undefined): FitVerdict {
  const needBytes = weightBytes + kvBytes;
  const need = `${formatBytes(weightBytes)} of weights + ${formatBytes(kvBytes)} of full KV cache = ${formatBytes(needBytes)}`;
  if (deviceMemoryGiB === undefined || !(deviceMemoryGiB > 0)) {
    return { needBytes, availableBytes: null, fits: null, text: `Needs ${need}; this browser does not say how much memory the device has.` };
  }
  const atLeast = deviceMemoryGiB * 2 ** 30;
  if (needBytes <= atLeast) return { needBytes, availableBytes: atLeast, fits: true, text: `Needs ${need}; fits the ${deviceMemoryGiB} GiB (or more) this device reports.` };
  if (deviceMemoryGiB < DEVICE_MEMORY_CAP_GIB && needBytes >= 2 * atLeast) {
    return {
      needBytes,
      availableBytes: atLeast,
      fits: false,
      text: `Needs ${need}, more than this device has (it reports ${deviceMemoryGiB} GiB): loading will fail. Convert the folder to 4-bit (npx wnw convert --quant q4), use a shorter clip or WnW with a smaller budget, or use a device with more memory.`,
    };
  }
  return { needBytes, availableBytes: atLeast, fits: null, text: `Needs ${need}; the device reports at least ${deviceMemoryGiB} GiB, so it may not fit.` };
}
