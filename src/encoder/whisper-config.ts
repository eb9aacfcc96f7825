/**
 * What differs between the Whisper-family audio encoders of the three speech LLMs, as
 * data: the encoder's shape (from the folder's `audio_config`) and a family spec (where
 * the tensors live, how positions are made, the attention window, how padding frames are
 * treated, and the steps from the last layer to the decoder's audio embeddings).
 */
import { ModelLoadError } from '../errors.js';

export interface WhisperEncoderConfig {
  nMels: number;
  dModel: number;
  layers: number;
  heads: number;
  ffnDim: number;
  /** Encoder frames (after the stride-2 conv) one window holds at most. */
  maxSourcePositions: number;
}

/** One step after the encoder layers, applied to the concatenated frames of an example. */
export type PostStep =
  | { op: 'layernorm'; name: string }
  | { op: 'avgpool'; size: 2 }
  | { op: 'stack'; size: number }
  | { op: 'linear'; name: string; bias: boolean }
  | { op: 'gelu' };

export interface WhisperFamilySpec {
  family: 'voxtral' | 'qwen2_audio' | 'qwen2_5_omni';
  /** Prefix of the encoder's tensors in the checkpoint. */
  prefix: string;
  /** Stored `embed_positions.weight`, or Whisper sinusoids computed at load time. */
  positions: 'stored' | 'sinusoids';
  /** Mel frames per attention window; positions restart in every window. */
  windowFrames: number;
  /**
   * Frames past the audio (the front-end's validFrames): 'encode' treats them as audio
   * (Voxtral); 'mask-keys' convolves them but masks them as attention keys and keeps only
   * the valid tokens (Qwen2-Audio); 'drop' cuts them before windowing (Qwen2.5-Omni).
   */
  padding: 'encode' | 'mask-keys' | 'drop';
  /** A window shorter than windowFrames is an error ('exact') or encoded as is ('tail'). */
  windows: 'exact' | 'tail';
  post: PostStep[];
}

export const VOXTRAL_ENCODER: WhisperFamilySpec = {
  family: 'voxtral',
  prefix: 'audio_tower.',
  positions: 'stored',
  windowFrames: 3000,
  padding: 'encode',
  windows: 'exact',
  post: [
    { op: 'layernorm', name: 'audio_tower.layer_norm' },
    { op: 'stack', size: 4 },
    { op: 'linear', name: 'multi_modal_projector.linear_1', bias: false },
    { op: 'gelu' },
    { op: 'linear', name: 'multi_modal_projector.linear_2', bias: false },
  ],
};

export const QWEN2_AUDIO_ENCODER: WhisperFamilySpec = {
  family: 'qwen2_audio',
  prefix: 'audio_tower.',
  positions: 'stored',
  windowFrames: 3000,
  padding: 'mask-keys',
  windows: 'exact',
  post: [
    { op: 'avgpool', size: 2 },
    { op: 'layernorm', name: 'audio_tower.layer_norm' },
    { op: 'linear', name: 'multi_modal_projector.linear', bias: true },
  ],
};

export const QWEN2_5_OMNI_ENCODER: WhisperFamilySpec = {
  family: 'qwen2_5_omni',
  prefix: 'thinker.audio_tower.',
  positions: 'sinusoids',
  windowFrames: 200, // 2 × n_window (100): 2 s
  padding: 'drop',
  windows: 'tail',
  post: [
    { op: 'avgpool', size: 2 },
    { op: 'layernorm', name: 'thinker.audio_tower.ln_post' },
    { op: 'linear', name: 'thinker.audio_tower.proj', bias: true },
  ],
};

/** The first of `keys` present in `cfg` (upstream aliases d_model/hidden_size and so on). */
function pick(cfg: Record<string, unknown>, file: string, keys: string[], fallback?: unknown): unknown {
  for (const k of keys) if (cfg[k] !== undefined) return cfg[k];
  if (fallback !== undefined) return fallback;
  throw new ModelLoadError(file, `audio_config has none of ${keys.join(', ')}`);
}

function positiveInt(v: unknown, file: string, key: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new ModelLoadError(file, `audio_config.${key} must be a positive integer, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Reads an upstream `audio_config` (voxtral_encoder, qwen2_audio_encoder,
 * qwen2_5_omni_audio_encoder). Values this encoder does not implement are typed errors
 * naming the key. `file` names config.json in messages.
 */
export function parseWhisperEncoderConfig(cfg: Record<string, unknown>, file = 'config.json', spec?: WhisperFamilySpec): WhisperEncoderConfig {
  const act = pick(cfg, file, ['activation_function', 'hidden_act'], 'gelu');
  if (act !== 'gelu') throw new ModelLoadError(file, `audio_config.activation_function is ${JSON.stringify(act)}; only "gelu" (exact, erf) is supported`);
  if (cfg.scale_embedding === true) throw new ModelLoadError(file, 'audio_config.scale_embedding is true; the supported encoders do not scale embeddings');
  const nMels = positiveInt(pick(cfg, file, ['num_mel_bins']), file, 'num_mel_bins');
  if (nMels !== 128 && nMels !== 80) throw new ModelLoadError(file, `audio_config.num_mel_bins is ${nMels}; the Whisper front-end is defined for 80 or 128 mel bins`);
  const dModel = positiveInt(pick(cfg, file, ['d_model', 'hidden_size']), file, 'd_model');
  const heads = positiveInt(pick(cfg, file, ['encoder_attention_heads', 'num_attention_heads']), file, 'encoder_attention_heads');
  if (dModel % heads !== 0) throw new ModelLoadError(file, `audio_config.encoder_attention_heads (${heads}) does not divide d_model (${dModel})`);
  const maxSourcePositions = positiveInt(pick(cfg, file, ['max_source_positions'], 1500), file, 'max_source_positions');
  if (spec && spec.family === 'qwen2_5_omni' && cfg.n_window !== undefined && cfg.n_window !== spec.windowFrames / 2) {
    throw new ModelLoadError(file, `audio_config.n_window is ${JSON.stringify(cfg.n_window)}; this encoder runs 2 s windows (n_window 100)`);
  }
  if (spec && spec.windows === 'exact' && spec.windowFrames !== 2 * maxSourcePositions) {
    throw new ModelLoadError(file, `audio_config.max_source_positions is ${maxSourcePositions}; ${spec.family} encodes ${spec.windowFrames}-frame windows (1500 positions)`);
  }
  return {
    nMels,
    dModel,
    layers: positiveInt(pick(cfg, file, ['encoder_layers', 'num_hidden_layers']), file, 'encoder_layers'),
    heads,
    ffnDim: positiveInt(pick(cfg, file, ['encoder_ffn_dim', 'intermediate_size']), file, 'encoder_ffn_dim'),
    maxSourcePositions,
  };
}
