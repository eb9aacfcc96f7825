/**
 * What a model folder holds, read from its small files alone (config.json, the converted
 * folder's marker, generation_config.json, which encoder files are there) before any weight
 * is: the facts a page shows before loading, and the sizes `checkFit` (fit-check.ts) judges
 * a device with. The loader asks the same questions of the same files (loader.ts decides the
 * layout and the stored format), so a summary says what a load would do.
 */
import { ModelLoadError } from '../errors.js';
import { towerBytes, type TowerBytes } from '../encoder/sizing.js';
import { parseWhisperEncoderConfig, type WhisperEncoderConfig } from '../encoder/whisper-config.js';
import { promptLength, parseConfig, type ModelConfig } from './config.js';
import type { Json } from './families/types.js';
import { exists, joinModelPath, readJson } from './files.js';
import { findOnnxAudioEncoder } from './hf/onnx-audio.js';
import { readHfConfig } from './hf/load.js';
import { configLayout, decoderFormat } from './loader.js';
import { localFolderFiles, openLocalFolder } from './local-folder.js';
import { readPackedMarker } from './packed-folder.js';
import { WEIGHT_FORMATS, decoderWeightBytes } from './packed-weights.js';
import type { WeightFormat } from './quant.js';

/** What the fit check needs of a folder: the decoder's config and its weights as a load stores them. */
export interface ModelSizing {
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

/** Where a folder's audio encoder comes from, as a load without `audioEncoder` takes it. */
export type AudioEncoderSummary =
  /** An ONNX graph: the project's own encoder.onnx, or a Hugging Face folder's onnx/audio_encoder*.onnx. */
  | { kind: 'onnx'; file: string }
  /**
   * A Hugging Face folder's audio tower, run from its checkpoint: on WebGPU beside the
   * decoder while encoding, in `LoadOptions.audioWeightFormat`. `bytes` is absent where
   * the config does not state the tower's shape (the load then refuses the folder).
   */
  | { kind: 'audio-tower'; bytes?: Record<WeightFormat, TowerBytes> };

export interface ModelSummary extends ModelSizing {
  /** What `LoadOptions.model` takes to load this folder: the URL or path given, or a picked folder's `wnw-files://` address. */
  model: string;
  /** The folder's name: the last part of its URL or path, or the picked folder's. */
  name: string;
  /** "qwen2_audio (Hugging Face, converted to q4)", "wnw (own layout)": the family as a page names it. */
  family: string;
  /** The project's own layout, or a Hugging Face folder. */
  layout: 'own' | 'hf';
  /** config.json's model_type ('voxtral', 'qwen2_audio', 'qwen2_5_omni'); 'wnw' for the own layout. */
  modelType: string;
  layers: number;
  hiddenSize: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Positions the decoder holds (max_position_embeddings): prompt, audio and text together. */
  maxPositions: number;
  /** Audio tokens one second of audio becomes. */
  audioTokensPerSecond: number;
  /** The longest recording the positions hold beside the prompt; a longer one is a CONTEXT_TOO_LONG error. */
  maxAudioSeconds: number;
  /** The formats a load can store the decoder in (`LoadOptions.weightFormat`): all three, or a converted folder's own. */
  weightFormats: WeightFormat[];
  /** The decoder's weight bytes in each of `weightFormats`. */
  weightBytesByFormat: Partial<Record<WeightFormat, number>>;
  /** The format `npx wnw convert` stored the folder in; absent for a folder of checkpoint weights. */
  converted?: WeightFormat;
  /** Whether heads.json is in the folder: WnW needs it (a calibration stored in this browser serves too). */
  headsJson: boolean;
  audioEncoder: AudioEncoderSummary;
}

/** The last part of a folder's address: what a page calls it. */
function folderName(base: string): string {
  const picked = localFolderFiles(base);
  if (picked) return picked.name;
  return (
    decodeURIComponent(
      base
        .replace(/[?#].*$/, '')
        .replace(/\/+$/, '')
        .split(/[/\\]/)
        .pop() ?? '',
    ) || base
  );
}

/**
 * Reads config.json (and the converted-folder marker): family, shapes and decoder weight
 * bytes, in the format the loader will store them in (`requested` where the folder is not
 * converted; src/model/loader.ts decides both).
 */
export async function summarizeModel(base: string, requested: WeightFormat = 'f32'): Promise<ModelSummary> {
  const file = joinModelPath(base, 'config.json');
  const json = (await readJson(file)) as Json;
  const headsJson = await exists(joinModelPath(base, 'heads.json'));
  if (configLayout(json, file) === 'own') {
    const config = parseConfig(json, file);
    const weightFormat = decoderFormat(null, requested);
    return {
      ...facts(base, config, headsJson),
      family: 'wnw (own layout)',
      layout: 'own',
      modelType: 'wnw',
      weightFormat,
      weightBytes: decoderWeightBytes(config, weightFormat).total,
      tied: false,
      ...formats(config, false, null),
      audioEncoder: { kind: 'onnx', file: 'encoder.onnx' },
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
  const audioTower = towerConfig
    ? (f: WeightFormat) => towerBytes(towerConfig, info.family.encoder, info.config.hiddenSize, f)
    : undefined;
  return {
    ...facts(base, info.config, headsJson),
    family: `${info.family.modelType} (Hugging Face${marker ? `, converted to ${marker.format}` : ''})`,
    layout: 'hf',
    modelType: info.family.modelType,
    weightFormat,
    weightBytes: decoderWeightBytes(info.config, weightFormat, tied).total,
    tied,
    ...formats(info.config, tied, marker?.format ?? null),
    ...(audioTower ? { audioTower } : {}),
    audioEncoder: onnx
      ? { kind: 'onnx', file: onnx.slice(joinModelPath(base, '').length) }
      : {
          kind: 'audio-tower',
          ...(audioTower
            ? {
                bytes: Object.fromEntries(WEIGHT_FORMATS.map((f) => [f, audioTower(f)])) as Record<
                  WeightFormat,
                  TowerBytes
                >,
              }
            : {}),
        },
  };
}

function facts(base: string, c: ModelConfig, headsJson: boolean) {
  return {
    model: base,
    name: folderName(base),
    config: c,
    layers: c.numLayers,
    hiddenSize: c.hiddenSize,
    heads: c.numHeads,
    kvHeads: c.numKvHeads,
    headDim: c.headDim,
    maxPositions: c.maxPositions,
    audioTokensPerSecond: c.audio.tokensPerSecond,
    maxAudioSeconds: secondsOf(Math.max(0, c.maxPositions - promptLength(c, 0)), c.audio.tokensPerSecond),
    headsJson,
  };
}

/**
 * The longest length in seconds that is at most `tokens` audio tokens as the fit check and
 * the loader count them (`ceil(seconds × rate)`): `tokens / rate` rounded down where the
 * division's rounding would make it one token more.
 */
function secondsOf(tokens: number, rate: number): number {
  let s = tokens / rate;
  while (Math.ceil(s * rate) > tokens) s -= s * 2 ** -50;
  return s;
}

/** The formats a load can ask for and the decoder's bytes in each: a converted folder keeps its own. */
function formats(c: ModelConfig, tied: boolean, converted: WeightFormat | null) {
  const weightFormats = converted ? [converted] : [...WEIGHT_FORMATS];
  return {
    weightFormats,
    weightBytesByFormat: Object.fromEntries(weightFormats.map((f) => [f, decoderWeightBytes(c, f, tied).total])),
    ...(converted ? { converted } : {}),
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

/**
 * What a model folder holds, before any weight is read: a served folder's URL, a path
 * (Node), a picked folder's `wnw-files://` address (`openLocalFolder`), or a directory
 * handle (`showDirectoryPicker()`), which is registered for this page as `openLocalFolder`
 * does (the summary's `model` is then its address). Weight sizes are those of a load that
 * asks for no `weightFormat`; `weightBytesByFormat` has the others, and `checkFit` takes
 * the format a load will ask for. A folder that is not a model is a MODEL_LOAD error naming
 * the file, as the load's would be.
 */
export async function inspectModel(source: string | FileSystemDirectoryHandle): Promise<ModelSummary> {
  if (typeof source === 'string') return summarizeModel(source);
  return summarizeModel((await openLocalFolder(source)).model);
}
