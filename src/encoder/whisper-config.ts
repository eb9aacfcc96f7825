/**
 * The Whisper-family audio encoder's shape, read from the folder's `audio_config`, and
 * checked against the family's encoder spec (the family record's `encoder`: where the
 * tensors live, how positions are made, the attention window, how padding frames are
 * treated, and the steps from the last layer to the decoder's audio embeddings).
 */
import { ModelLoadError } from '../errors.js';
import type { WhisperFamilySpec } from '../model/families/types.js';

export interface WhisperEncoderConfig {
  nMels: number;
  dModel: number;
  layers: number;
  heads: number;
  ffnDim: number;
  /** Encoder frames (after the stride-2 conv) one window holds at most. */
  maxSourcePositions: number;
}

export type { PostStep, WhisperFamilySpec } from '../model/families/types.js';

/** The first of `keys` present in `cfg` (upstream aliases d_model/hidden_size and so on). */
function pick(cfg: Record<string, unknown>, file: string, keys: string[], fallback?: unknown): unknown {
  for (const k of keys) if (cfg[k] !== undefined) return cfg[k];
  if (fallback !== undefined) return fallback;
  throw new ModelLoadError(file, `audio_config has none of ${keys.join(', ')}`);
}

function positiveInt(v: unknown, file: string, key: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
    throw new ModelLoadError(file, `audio_config.${key} must be a positive integer, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Reads an upstream `audio_config` of a Whisper-family encoder. Values this encoder does not implement are typed errors
 * naming the key. `file` names config.json in messages.
 */
export function parseWhisperEncoderConfig(
  cfg: Record<string, unknown>,
  file = 'config.json',
  spec?: WhisperFamilySpec,
): WhisperEncoderConfig {
  const act = pick(cfg, file, ['activation_function', 'hidden_act'], 'gelu');
  if (act !== 'gelu')
    throw new ModelLoadError(
      file,
      `audio_config.activation_function is ${JSON.stringify(act)}; only "gelu" (exact, erf) is supported`,
    );
  if (cfg.scale_embedding === true)
    throw new ModelLoadError(
      file,
      'audio_config.scale_embedding is true; the supported encoders do not scale embeddings',
    );
  const nMels = positiveInt(pick(cfg, file, ['num_mel_bins']), file, 'num_mel_bins');
  if (nMels !== 128 && nMels !== 80)
    throw new ModelLoadError(
      file,
      `audio_config.num_mel_bins is ${nMels}; the Whisper front-end is defined for 80 or 128 mel bins`,
    );
  const dModel = positiveInt(pick(cfg, file, ['d_model', 'hidden_size']), file, 'd_model');
  const heads = positiveInt(
    pick(cfg, file, ['encoder_attention_heads', 'num_attention_heads']),
    file,
    'encoder_attention_heads',
  );
  if (dModel % heads !== 0)
    throw new ModelLoadError(
      file,
      `audio_config.encoder_attention_heads (${heads}) does not divide d_model (${dModel})`,
    );
  const maxSourcePositions = positiveInt(pick(cfg, file, ['max_source_positions'], 1500), file, 'max_source_positions');
  const halfKey = spec?.halfWindowKey;
  if (spec && halfKey && cfg[halfKey] !== undefined && cfg[halfKey] !== spec.windowFrames / 2) {
    // 100 mel frames per second (10 ms hop).
    throw new ModelLoadError(
      file,
      `audio_config.${halfKey} is ${JSON.stringify(cfg[halfKey])}; ` +
        `this encoder runs ${spec.windowFrames / 100} s windows (${halfKey} ${spec.windowFrames / 2})`,
    );
  }
  if (spec && spec.windows === 'exact' && spec.windowFrames !== 2 * maxSourcePositions) {
    throw new ModelLoadError(
      file,
      `audio_config.max_source_positions is ${maxSourcePositions}; ${spec.family} encodes ${spec.windowFrames}-frame windows (1500 positions)`,
    );
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
