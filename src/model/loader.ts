/**
 * Loads a model folder. Two layouts are read:
 * - our own (config.json with `hidden_size` at top level and no `model_type`):
 *   config.json, decoder.safetensors, tokenizer.json, encoder.onnx, optional heads.json;
 * - a Hugging Face folder of a supported `model_type` (voxtral, qwen2_audio,
 *   qwen2_5_omni): config.json, sharded safetensors, tokenizer files. Its audio encoder
 *   is the checkpoint's audio tower, which src/encoder reads from the same folder, or an
 *   ONNX export of it in the onnx-community layout (onnx/audio_encoder*.onnx) where the
 *   folder has one (`audioEncoder` chooses when both are there).
 * Each file is checked against the config as it arrives, so a bad model fails at load
 * naming the file and tensor, before any GPU work.
 */
import { ModelLoadError } from '../errors.js';
import { headsFileFault, type HeadsFile } from './heads.js';
import { parseConfig, kvHeadCount, type ModelConfig } from './config.js';
import type { HfFamily, Json } from './families/types.js';
import { exists, joinModelPath, readBytes, readJson } from './files.js';
import { loadHfDecoder, loadHfDecoderPacked, readHfConfig, refuseMistralNative, type HfModelInfo } from './hf/load.js';
import { loadHfText } from './hf/text.js';
import { readHfOnnxEncoder, type AudioEncoderChoice, type HfOnnxEncoder } from './hf/onnx-audio.js';
import type { TextTokenizer } from './text/types.js';
import { Tokenizer } from './tokenizer.js';
import { loadDecoderWeights, type DecoderWeights } from './weights.js';
import { loadPackedDecoder, packedFolderSource, readPackedMarker, type PackedMarker } from './packed-folder.js';
import { sourceWeightBytes, type PackedWeightSource } from './packed-source.js';
import { packedWeightBytes, unpackDecoderWeights, type PackedDecoderWeights } from './packed-weights.js';
import type { WeightFormat } from './quant.js';
import {
  cachedWeightSource,
  readCachedWeights,
  storeCachedSource,
  storeCachedWeights,
  weightCacheKey,
} from './weight-cache.js';
import { readStoredHeads } from './heads-store.js';

/** Where the audio encoder comes from. */
export type EncoderSource =
  /** Our own folders: an ONNX graph mel -> embeddings. */
  | { kind: 'onnx'; file: string; bytes: Uint8Array; input: string; output: string }
  /** A Hugging Face folder's ONNX audio encoder (onnx/audio_encoder*.onnx), unless the audio tower is asked for. */
  | HfOnnxEncoder
  /**
   * A Hugging Face folder: the audio tower (and projector) tensors under these prefixes; `modelType` names
   * the family in readouts (the route takes the record from LoadedModel.family).
   */
  | { kind: 'hf-audio-tower'; base: string; modelType: string; prefixes: string[] };

export interface LoadedModel {
  base: string;
  config: ModelConfig;
  weights: DecoderWeights;
  /** The SentencePiece tokenizer of our own folders (see `text` for a Hugging Face folder's). */
  readonly tokenizer: Tokenizer;
  /** A Hugging Face folder's tokenizer (tekken.json or tokenizer.json). */
  text?: TextTokenizer;
  /** Where the audio encoder comes from (absent in hand-built models: the ONNX `encoderBytes`). */
  encoder?: EncoderSource;
  /** The ONNX encoder's bytes; a typed error for a folder whose encoder is not an ONNX graph. */
  readonly encoderBytes: Uint8Array;
  /** Set for a Hugging Face folder. */
  family?: HfFamily;
  heads?: HeadsFile;
  /** Bytes of decoder weights (for memory readouts). */
  weightBytes: number;
  /**
   * The decoder packed in a weight format: as a folder converted by `npx wnw convert`
   * stores it, or packed while loading (options.weightFormat); the backends take it as is
   * and `weights` dequantises it on first use only.
   */
  packed?: PackedDecoderWeights;
  /**
   * With `stream`: the packed decoder as byte ranges of its files (a converted folder's
   * shards, or the browser cache's entry), not read; the WebGPU backend streams them into
   * its buffers, so the page holds no copy of the weights. `packed` and `weights` are then
   * absent (`weights` fails saying so).
   */
  source?: PackedWeightSource;
}

/**
 * `bytes`: of the decoder's checkpoint tensors, where they are being read from the shards
 * ('download') or packed to f16/q4 as they are read ('convert').
 */
export type LoadProgress = (
  fraction: number,
  detail: string,
  bytes?: { loaded: number; total: number },
  phase?: 'download' | 'convert',
) => void;

export interface ModelLoadOptions {
  /** Language of the audio as an ISO code ("en"), for a prompt that names it; omitted: the model detects it. */
  language?: string;
  /** A Hugging Face folder holding both: its ONNX audio encoder (default) or its audio tower; see hf/onnx-audio.ts. */
  audioEncoder?: AudioEncoderChoice;
  /**
   * The weight format the decoder will run in. For a Hugging Face folder not converted by
   * `npx wnw convert`, 'f16' or 'q4' packs each tensor as it is read, so the f32 decoder
   * never exists in memory (`packed` is set); a converted folder keeps its own format.
   */
  weightFormat?: WeightFormat;
  /**
   * In a browser with OPFS, packed weights (packed at load, or read from a converted
   * folder) are cached there and the next load of the same folder (same shards) in the
   * same format reads them instead of the shards
   * (src/model/weight-cache.ts); false: neither read nor write the cache. Default true.
   */
  cache?: boolean;
  /**
   * Called once the config is read and checked and before any weight byte is: the decoder's
   * config, the format its matrices will be stored in on the backend, and whether the
   * lm_head is the embedding's table; `load.packAtLoad`: the decoder is packed as it is read
   * (an upstream folder with weightFormat f16 or q4: one f32 tensor at a time beside the packed
   * ones). A throw ends the load there (the transcriber's fit check, host memory included).
   */
  beforeWeights?: (
    config: ModelConfig,
    format: WeightFormat,
    tied: boolean,
    load: { packAtLoad: boolean },
  ) => void | Promise<void>;
  /**
   * Where the decoder is packed already (a folder converted by `npx wnw convert`, or one in
   * the browser cache), locate its tensors without reading them and set `source` in place
   * of `packed`: for the WebGPU backend, which streams them in. A miss of the browser cache
   * copies the folder's tensors into it piece by piece first (the download progress), then
   * streams from there. A folder packed at load is packed in memory as without it, and
   * once stored in the cache, streamed from there (its packed copy let go). Default false.
   */
  stream?: boolean;
}

/**
 * Which loader a folder's config.json calls for: our own layout (`hidden_size` at top level
 * and no `model_type`; Voxtral's config has both) or a Hugging Face folder (`model_type`).
 * The demo's model panel asks the same question before loading, so it is answered here once.
 */
export function configLayout(json: unknown, file: string): 'own' | 'hf' {
  if (typeof json === 'object' && json !== null && !('model_type' in json) && 'hidden_size' in json) return 'own';
  if (typeof json !== 'object' || json === null || typeof (json as Json)['model_type'] !== 'string') {
    throw new ModelLoadError(
      file,
      'is neither a wnw model config (hidden_size at top level) nor a Hugging Face config (model_type)',
    );
  }
  return 'hf';
}

/** The format the decoder's matrices are stored in on the backend: a converted folder's own, else the one asked for. */
export function decoderFormat(marker: PackedMarker | null, requested: WeightFormat | undefined): WeightFormat {
  return marker?.format ?? requested ?? 'f32';
}

export async function loadModel(
  base: string,
  onProgress?: LoadProgress,
  options: ModelLoadOptions = {},
): Promise<LoadedModel> {
  const path = (n: string) => joinModelPath(base, n);
  if (!(await exists(path('config.json')))) await refuseMistralNative(base);
  const json = await readJson(path('config.json'));
  if (configLayout(json, path('config.json')) === 'hf') return loadHfModel(base, json as Json, onProgress, options);
  const config = parseConfig(json, path('config.json'));
  const tokenizer = Tokenizer.fromJSON(await readJson(path('tokenizer.json')), path('tokenizer.json'));
  if (tokenizer.vocabSize !== config.vocabSize) {
    throw new ModelLoadError(
      path('tokenizer.json'),
      `has ${tokenizer.vocabSize} pieces, config.json says vocab_size ${config.vocabSize}`,
    );
  }
  await options.beforeWeights?.(config, decoderFormat(null, options.weightFormat), false, { packAtLoad: false });
  const decoderBytes = await readBytes(path('decoder.safetensors'), (l, t) =>
    onProgress?.((0.8 * l) / t, 'decoder weights'),
  );
  const weights = loadDecoderWeights(config, decoderBytes, path('decoder.safetensors'));
  const file = path('encoder.onnx');
  const encoderBytes = new Uint8Array(
    await readBytes(file, (l, t) => onProgress?.(0.8 + (0.2 * l) / t, 'audio encoder')),
  );
  const heads = await loadHeads(base, config);
  onProgress?.(1, 'model loaded');
  return {
    base,
    config,
    weights,
    tokenizer,
    encoder: { kind: 'onnx', file, bytes: encoderBytes, input: 'mel', output: 'embeddings' },
    encoderBytes,
    heads,
    weightBytes: decoderBytes.byteLength,
  };
}

async function loadHfModel(
  base: string,
  json: Json,
  onProgress: LoadProgress | undefined,
  options: ModelLoadOptions,
): Promise<LoadedModel> {
  const info = await readHfConfig(base, json);
  // The tokenizer and prompt are checked against the config before any weights are read.
  const t = await loadHfText(base, info.family, info.config, info.audioTokenId, options.language);
  const text = t.tokenizer;
  const config: ModelConfig = {
    ...info.config,
    prefix: t.prefix,
    instruction: t.instruction,
    stopTokens: t.stopTokens,
  };
  // A converted folder's decoder is read packed, without conversion.
  const marker = await readPackedMarker(base);
  const format = decoderFormat(marker, options.weightFormat);
  const packAtLoad = !marker && format !== 'f32';
  await options.beforeWeights?.(config, format, info.tiedEmbeddings, { packAtLoad });
  const dec = marker || packAtLoad ? null : await loadHfDecoder(base, { ...info, config }, onProgress);
  const useCache = options.cache !== false;
  let source =
    options.stream && (marker || packAtLoad)
      ? await sourceThroughCache(base, format, config, useCache, onProgress, async () =>
          marker ? (await packedFolderSource(base, info.family, config, info.tiedEmbeddings)).source : null,
        )
      : null;
  let packed = source
    ? undefined
    : marker
      ? await throughCache(
          base,
          marker.format,
          config,
          useCache,
          onProgress,
          async () => (await loadPackedDecoder(base, info.family, config, info.tiedEmbeddings, onProgress)).packed,
        )
      : packAtLoad
        ? await throughCache(
            base,
            format,
            config,
            useCache,
            onProgress,
            async () => (await loadHfDecoderPacked(base, { ...info, config }, format, onProgress)).packed,
          )
        : undefined;
  if (options.stream && packAtLoad && packed) {
    // Packed at load and now in the cache: the page streams from the cache and lets its packed copy go.
    const key = useCache ? await weightCacheKey(base, format) : null;
    const cached = key ? await cachedWeightSource(key, config) : null;
    if (cached) [source, packed] = [cached, undefined];
  }
  let unpacked: DecoderWeights | undefined;
  const family = info.family;
  const heads = await loadHeads(base, config);
  onProgress?.(1, 'model loaded');
  const encoder: EncoderSource = (await readHfOnnxEncoder(base, family, options.audioEncoder)) ?? {
    kind: 'hf-audio-tower',
    base,
    modelType: family.modelType,
    prefixes: family.encoderPrefixes,
  };
  const model: Omit<LoadedModel, 'tokenizer' | 'encoderBytes'> = {
    base,
    config,
    text,
    encoder,
    family,
    heads,
    get weights() {
      if (source)
        throw new ModelLoadError(
          base,
          'the decoder was loaded to be streamed to the GPU (stream: true), so its weights are not in memory; load it without `stream` to read them',
        );
      return dec?.weights ?? (unpacked ??= unpackDecoderWeights(config, packed!));
    },
    weightBytes: source
      ? sourceWeightBytes(source).total
      : packed
        ? packedWeightBytes(packed).total
        : f32Bytes(dec!.weights),
    ...(packed ? { packed } : {}),
    ...(source ? { source } : {}),
  };
  return Object.defineProperties(model, {
    tokenizer: {
      enumerable: false,
      get: () => {
        throw new ModelLoadError(
          joinModelPath(base, 'tokenizer.json'),
          `a ${family.modelType} folder's tokenizer is in \`text\`; this use needs the reference model's SentencePiece tokenizer`,
        );
      },
    },
    encoderBytes: {
      enumerable: false,
      get: () => {
        if (encoder.kind === 'onnx') return encoder.bytes;
        throw new ModelLoadError(
          base,
          `the audio encoder of a ${family.modelType} folder is its audio tower (${family.encoderPrefixes.join(', ')}), ` +
            'not an ONNX graph: it runs through the audio route (src/route/audio-route.ts), ' +
            'which reads its tensors from the folder',
        );
      },
    },
  }) as LoadedModel;
}

/**
 * A folder's packed decoder from the browser's cache of an earlier load where there is one,
 * else by `load` (packed while read, or read packed from a converted folder) and then cached.
 */
async function throughCache(
  base: string,
  format: WeightFormat,
  config: ModelConfig,
  useCache: boolean,
  onProgress: LoadProgress | undefined,
  load: () => Promise<PackedDecoderWeights>,
): Promise<PackedDecoderWeights> {
  const key = useCache ? await weightCacheKey(base, format) : null;
  const cached = key ? await readCachedWeights(key, config) : null;
  if (cached) {
    onProgress?.(1, `decoder weights (${format}, from the browser cache)`);
    return cached;
  }
  const packed = await load();
  if (key) await storeCachedWeights(key, packed);
  return packed;
}

/**
 * A packed decoder as a source to stream from (see ModelLoadOptions.stream): the browser
 * cache's entry where there is one; else the converted folder's (`locate`), copied into the
 * cache first where there is one to fill, so the next load reads no shard. Null: a folder
 * packed at load and not in the cache, read into memory as without `stream`.
 */
async function sourceThroughCache(
  base: string,
  format: WeightFormat,
  config: ModelConfig,
  useCache: boolean,
  onProgress: LoadProgress | undefined,
  locate: () => Promise<PackedWeightSource | null>,
): Promise<PackedWeightSource | null> {
  const key = useCache ? await weightCacheKey(base, format) : null;
  const cached = key ? await cachedWeightSource(key, config) : null;
  if (cached) {
    onProgress?.(1, `decoder weights (${format}, from the browser cache)`);
    return cached;
  }
  const folder = await locate();
  if (!folder) return null;
  if (key) {
    const stored = await storeCachedSource(key, folder, (loaded, total) =>
      onProgress?.(total ? loaded / total : 1, 'decoder weights (packed)', { loaded, total }),
    );
    const fromCache = stored ? await cachedWeightSource(key, config) : null;
    if (fromCache) return fromCache;
  }
  onProgress?.(1, 'decoder weights (packed, read as they upload)');
  return folder;
}

/** Bytes the decoder's f32 weights occupy (a tied head counted once). */
function f32Bytes(w: DecoderWeights): number {
  const arrays = new Set<Float32Array>([w.embed, w.norm, w.lmHead]);
  for (const l of w.layers) for (const a of Object.values(l)) if (a) arrays.add(a);
  let n = 0;
  for (const a of arrays) n += a.byteLength;
  return n;
}

async function loadHeads(base: string, config: ModelConfig): Promise<HeadsFile | undefined> {
  const file = joinModelPath(base, 'heads.json');
  if (!(await exists(file))) return storedHeads(base, config);
  const heads = (await readJson(file)) as HeadsFile;
  if (typeof heads !== 'object' || heads === null || Array.isArray(heads))
    throw new ModelLoadError(
      file,
      "must hold a JSON object (the calibration's output); run npm run calibrate to write it again",
    );
  if (
    heads.numLayers !== config.numLayers ||
    heads.numKvHeads !== config.numKvHeads ||
    heads.voiceScore?.length !== kvHeadCount(config)
  ) {
    throw new ModelLoadError(
      file,
      `was calibrated for ${heads.numLayers}x${heads.numKvHeads} KV heads, the model has ${config.numLayers}x${config.numKvHeads}; run npm run calibrate`,
    );
  }
  const fault = headsFileFault(heads, kvHeadCount(config));
  if (fault) throw new ModelLoadError(file, `${fault}; run npm run calibrate to write it again`);
  return heads;
}

/**
 * A folder without heads.json: the one a calibration in this browser stored for it
 * (heads-store.ts), if any. One that does not fit the model is passed over, not an error:
 * the folder then loads as uncalibrated, and the page offers to calibrate it again.
 */
async function storedHeads(base: string, config: ModelConfig): Promise<HeadsFile | undefined> {
  const h = (await readStoredHeads(base)) as HeadsFile | null;
  if (typeof h !== 'object' || h === null || Array.isArray(h)) return undefined;
  if (h.numLayers !== config.numLayers || h.numKvHeads !== config.numKvHeads || headsFileFault(h, kvHeadCount(config)))
    return undefined;
  return h;
}
