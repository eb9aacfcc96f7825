/**
 * Loads a model folder: config.json, decoder.safetensors, tokenizer.json, encoder.onnx
 * and (optional) heads.json from calibration. Each file is checked against the config
 * as it arrives, so a bad model fails at load naming the file and tensor.
 */
import { ModelLoadError } from '../errors.js';
import type { HeadsFile } from '../policy/types.js';
import { parseConfig, kvHeadCount, type ModelConfig } from './config.js';
import { exists, joinModelPath, readBytes, readJson } from './files.js';
import { Tokenizer } from './tokenizer.js';
import { loadDecoderWeights, type DecoderWeights } from './weights.js';

export interface LoadedModel {
  base: string;
  config: ModelConfig;
  weights: DecoderWeights;
  tokenizer: Tokenizer;
  encoderBytes: Uint8Array;
  heads?: HeadsFile;
  /** Bytes of decoder weights (for memory readouts). */
  weightBytes: number;
}

export async function loadModel(base: string, onProgress?: (fraction: number, detail: string) => void): Promise<LoadedModel> {
  const path = (n: string) => joinModelPath(base, n);
  const config = parseConfig(await readJson(path('config.json')), path('config.json'));
  const tokenizer = Tokenizer.fromJSON(await readJson(path('tokenizer.json')), path('tokenizer.json'));
  if (tokenizer.vocabSize !== config.vocabSize) {
    throw new ModelLoadError(path('tokenizer.json'), `has ${tokenizer.vocabSize} pieces, config.json says vocab_size ${config.vocabSize}`);
  }
  const decoderBytes = await readBytes(path('decoder.safetensors'), (l, t) => onProgress?.((0.8 * l) / t, 'decoder weights'));
  const weights = loadDecoderWeights(config, decoderBytes, path('decoder.safetensors'));
  const encoderBytes = new Uint8Array(await readBytes(path('encoder.onnx'), (l, t) => onProgress?.(0.8 + (0.2 * l) / t, 'audio encoder')));
  let heads: HeadsFile | undefined;
  if (await exists(path('heads.json'))) {
    heads = (await readJson(path('heads.json'))) as HeadsFile;
    if (heads.numLayers !== config.numLayers || heads.numKvHeads !== config.numKvHeads || heads.voiceScore?.length !== kvHeadCount(config)) {
      throw new ModelLoadError(path('heads.json'), `was calibrated for ${heads.numLayers}x${heads.numKvHeads} KV heads, the model has ${config.numLayers}x${config.numKvHeads}; run npm run calibrate`);
    }
  }
  onProgress?.(1, 'model loaded');
  return { base, config, weights, tokenizer, encoderBytes, heads, weightBytes: decoderBytes.byteLength };
}
