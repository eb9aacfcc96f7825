/**
 * Loads the decoder of a Hugging Face folder (voxtral, qwen2_audio, qwen2_5_omni): config
 * through the family, then the checkpoint's headers; the whole tensor plan (names, shapes,
 * dtypes, layer count) is checked before any tensor data is read, then tensors are read
 * one by one. The audio encoder's tensors stay in the folder for src/encoder.
 */
import { ModelLoadError } from '../../errors.js';
import { decoderTensorShapes, type ModelConfig } from '../config.js';
import { isDecoderTensor, upstreamTensorName } from '../families/common.js';
import { familyFor, FAMILIES } from '../families/registry.js';
import type { HfFamily, Json } from '../families/types.js';
import { exists, joinModelPath, readJson } from '../files.js';
import { packedDecoderFrom, type PackedDecoderWeights } from '../packed-weights.js';
import { quantizeTensor, type PackedMatrix, type WeightFormat } from '../quant.js';
import { assembleWeights, type DecoderWeights } from '../weights.js';
import { HfCheckpoint } from './checkpoint.js';
import { hfModelConfig } from './config.js';

/** config.json read through its family, before any weights. */
export interface HfModelInfo {
  family: HfFamily;
  config: ModelConfig;
  audioTokenId: number;
  /** Decoder config keys filled from the family's defaults. */
  defaulted: string[];
  tiedEmbeddings: boolean;
}

export interface HfDecoder {
  weights: DecoderWeights;
  /** lm_head came from embed_tokens (tied, or no lm_head stored). */
  tiedHead: boolean;
  /** Bytes of decoder tensors read from the checkpoint. */
  fileBytes: number;
}

/** The registry's family for config.json's model_type, or a ModelLoadError naming the supported ones. */
export function hfFamily(json: Json, file: string): HfFamily {
  const type = json['model_type'];
  const family = typeof type === 'string' ? familyFor(type) : undefined;
  if (!family) {
    throw new ModelLoadError(
      file,
      `model_type ${JSON.stringify(type)} is not supported; ` +
        `supported Hugging Face folders: ${FAMILIES.map((f) => `${f.modelType} (e.g. ${f.example})`).join(', ')}`,
    );
  }
  return family;
}

/** The family and decoder config of a folder's config.json (with generation_config.json's stop ids). */
export async function readHfConfig(base: string, json: Json): Promise<HfModelInfo> {
  const configFile = joinModelPath(base, 'config.json');
  const family = hfFamily(json, configFile);
  const genFile = joinModelPath(base, 'generation_config.json');
  const generation = (await exists(genFile)) ? ((await readJson(genFile)) as Json) : undefined;
  const info = hfModelConfig(
    family,
    json,
    configFile,
    generation,
    `${family.modelType}:${base.replace(/\/+$/, '').split('/').pop()}`,
  );
  return { family, ...info };
}

/** Share of the decoder's checkpoint bytes read (download) or packed (convert) so far, and the bytes themselves. */
export type DecoderProgress = (
  fraction: number,
  detail: string,
  bytes: { loaded: number; total: number },
  phase?: 'download' | 'convert',
) => void;

/** A checkpoint opened with its decoder plan checked: which stored tensor each internal name reads. */
interface DecoderPlan {
  ckpt: HfCheckpoint;
  shapes: Map<string, number[]>;
  source: (internal: string) => string;
  tiedHead: boolean;
  /** Bytes of decoder tensors in the checkpoint (a tied table counted once). */
  total: number;
}

/**
 * Opens the checkpoint and checks every decoder tensor's name, dtype and shape against the
 * config before any tensor data is read.
 */
async function openDecoderPlan(base: string, info: HfModelInfo): Promise<DecoderPlan> {
  const { family, config: c } = info;
  const ckpt = await HfCheckpoint.open(base);
  try {
    const shapes = decoderTensorShapes(c);
    const expected = new Set([...shapes.keys()].map((n) => upstreamTensorName(family, n)));
    // A decoder tensor the config does not describe (an extra layer, a bias on a Llama)
    // means config.json and the weights disagree.
    for (const name of ckpt.tensors.keys()) {
      if (isDecoderTensor(family, name) && !expected.has(name)) {
        throw new ModelLoadError(
          ckpt.info(name)!.file,
          'the weights hold this decoder tensor but config.json does not describe it ' +
            `(num_hidden_layers ${c.numLayers}?): config.json does not match the weights`,
          name,
        );
      }
    }
    const tiedHead = !ckpt.info(family.lmHead) && info.tiedEmbeddings;
    const source = (internal: string) =>
      internal === 'lm_head.weight' && tiedHead
        ? upstreamTensorName(family, 'embed_tokens.weight')
        : upstreamTensorName(family, internal);
    const plan = new Map(
      [...shapes].map(([internal, shape]) => [source(internal), ckpt.check(source(internal), shape).byteLength]),
    );
    const total = [...plan.values()].reduce((a, b) => a + b, 0);
    return { ckpt, shapes, source, tiedHead, total };
  } catch (e) {
    await ckpt.close();
    throw e;
  }
}

/** The decoder's weights for `info` (whose config may have its prompt filled in by now). */
export async function loadHfDecoder(base: string, info: HfModelInfo, onProgress?: DecoderProgress): Promise<HfDecoder> {
  const { ckpt, shapes, source, tiedHead, total } = await openDecoderPlan(base, info);
  try {
    let done = 0;
    const tensors = new Map<string, Float32Array>();
    for (const [internal, shape] of shapes) {
      const name = source(internal);
      // A tied head reads the embedding once.
      tensors.set(
        name,
        tensors.get(name) ??
          (await ckpt.f32(name, shape, (n) =>
            onProgress?.((done += n) / total, 'decoder weights', { loaded: done, total }),
          )),
      );
    }
    const weights = assembleWeights(info.config, (internal) => tensors.get(source(internal))!);
    return { weights, tiedHead, fileBytes: total };
  } finally {
    await ckpt.close();
  }
}

export interface HfPackedDecoder {
  packed: PackedDecoderWeights;
  tiedHead: boolean;
  fileBytes: number;
}

/**
 * The decoder packed in `format` as it is read: each tensor is widened to f32, packed the
 * way `npx wnw convert` packs it (quantizeTensor) and dropped before the next is read, so
 * memory holds the packed weights plus one f32 tensor (Voxtral in q4: 2.1 GiB and at most
 * its 1.5 GiB f32 embedding, instead of 15 GiB of f32 weights).
 */
export async function loadHfDecoderPacked(
  base: string,
  info: HfModelInfo,
  format: WeightFormat,
  onProgress?: DecoderProgress,
): Promise<HfPackedDecoder> {
  const { ckpt, shapes, source, tiedHead, total } = await openDecoderPlan(base, info);
  try {
    let done = 0;
    let converted = 0;
    const got = new Map<string, PackedMatrix>();
    // One tensor per call: its f32 values live only in this frame.
    const packOne = async (name: string, shape: number[]): Promise<PackedMatrix> => {
      const values = await ckpt.f32(name, shape, (n) =>
        onProgress?.((done += n) / total, 'decoder weights', { loaded: done, total }, 'download'),
      );
      const info = ckpt.info(name)!;
      const q = quantizeTensor(name, values, shape, format, info.file);
      converted += info.byteLength;
      onProgress?.(converted / total, `decoder weights to ${format}`, { loaded: converted, total }, 'convert');
      return { format: q.format, rows: q.rows, cols: q.cols, data: q.data };
    };
    for (const [internal, shape] of shapes) {
      const name = source(internal);
      if (!got.has(name)) got.set(name, await packOne(name, shape));
    }
    // Each part is let go once stacked into Wqkv or gate_up, so the parts and their stacks
    // coexist for one layer at a time; the embedding stays for a tied head.
    const embedName = source('embed_tokens.weight');
    const packed = packedDecoderFrom(info.config, (internal) => {
      const name = source(internal);
      const m = got.get(name)!;
      if (name !== embedName) got.delete(name);
      return m;
    });
    return { packed, tiedHead, fileBytes: total };
  } finally {
    await ckpt.close();
  }
}

/**
 * Mistral's native layout (consolidated.safetensors + params.json) stores q/k rows for
 * interleaved-pair RoPE, while the runtime's RoPE rotates halves as the HF files expect;
 * loading it would silently garble attention, so it is refused with what to download.
 */
export async function refuseMistralNative(base: string): Promise<void> {
  const params = joinModelPath(base, 'params.json');
  const consolidated = joinModelPath(base, 'consolidated.safetensors');
  const has = (await exists(params)) ? params : (await exists(consolidated)) ? consolidated : null;
  if (!has) return;
  throw new ModelLoadError(
    has,
    "is Mistral's native checkpoint layout (consolidated.safetensors + params.json), which this runtime does not read: its q/k " +
      'projection rows are ordered for interleaved-pair RoPE, not the rotate-half RoPE of the Hugging Face files. Download the ' +
      'Hugging Face format files of mistralai/Voxtral-Mini-3B-2507 (config.json, model-0000N-of-0000M.safetensors, ' +
      'model.safetensors.index.json, tekken.json) into this folder instead.',
  );
}
