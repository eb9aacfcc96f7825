/** Decoder weights, checked tensor by tensor against the config's shapes. */
import { ModelLoadError } from '../errors.js';
import { decoderTensorShapes, type ModelConfig } from './config.js';
import { SafeTensors } from './safetensors.js';

export interface LayerWeights {
  attnNorm: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  o: Float32Array;
  /** q/k/v biases, present exactly when config.attentionBias. */
  qBias?: Float32Array;
  kBias?: Float32Array;
  vBias?: Float32Array;
  mlpNorm: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
}

export interface DecoderWeights {
  embed: Float32Array;
  layers: LayerWeights[];
  norm: Float32Array;
  lmHead: Float32Array;
}

/** Builds DecoderWeights from a name -> tensor lookup; `get` throws on a missing tensor. */
export function assembleWeights(
  config: ModelConfig,
  get: (name: string, shape: number[]) => Float32Array,
): DecoderWeights {
  const shapes = decoderTensorShapes(config);
  const t = (name: string) => get(name, shapes.get(name)!);
  const layers: LayerWeights[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    const p = `layers.${l}.`;
    layers.push({
      attnNorm: t(p + 'attn_norm.weight'),
      q: t(p + 'q_proj.weight'),
      k: t(p + 'k_proj.weight'),
      v: t(p + 'v_proj.weight'),
      o: t(p + 'o_proj.weight'),
      mlpNorm: t(p + 'mlp_norm.weight'),
      gate: t(p + 'gate_proj.weight'),
      up: t(p + 'up_proj.weight'),
      down: t(p + 'down_proj.weight'),
      ...(config.attentionBias
        ? { qBias: t(p + 'q_proj.bias'), kBias: t(p + 'k_proj.bias'), vBias: t(p + 'v_proj.bias') }
        : {}),
    });
  }
  return { embed: t('embed_tokens.weight'), layers, norm: t('norm.weight'), lmHead: t('lm_head.weight') };
}

/** Parses decoder.safetensors; a missing, truncated or mis-shaped tensor fails naming file and tensor. */
export function loadDecoderWeights(
  config: ModelConfig,
  bytes: ArrayBuffer,
  file = 'decoder.safetensors',
): DecoderWeights {
  const st = new SafeTensors(bytes, file);
  const expected = decoderTensorShapes(config);
  for (const name of st.tensors.keys()) {
    if (!expected.has(name))
      throw new ModelLoadError(file, 'unexpected tensor: the config does not describe it (num_layers?)', name);
  }
  return assembleWeights(config, (name, shape) => {
    if (!st.has(name))
      throw new ModelLoadError(file, 'tensor is missing (does config.json match these weights?)', name);
    const w = st.f32View(name, shape);
    for (let i = 0; i < w.length; i++) {
      if (!Number.isFinite(w[i])) throw new ModelLoadError(file, `non-finite value at element ${i}`, name);
    }
    return w;
  });
}
