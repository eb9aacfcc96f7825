/**
 * A Hugging Face config.json read through its family: the nested decoder config with the
 * upstream defaults filled in, RoPE theta from `rope_parameters` (transformers v5) or
 * `rope_theta`, head_dim from the config (Voxtral's is not hidden/heads), and the audio
 * fields the policies need (token rate, encoder window).
 */
import { ModelLoadError } from '../../errors.js';
import { kernelWidthFault, type AudioConfig, type ModelConfig } from '../config.js';
import { ConfigFieldError, tokenIds } from '../families/common.js';
import type { HfFamily, Json } from '../families/types.js';

/** Which keys of the decoder config came from the family's defaults (tests, messages). */
export interface HfConfigInfo {
  config: ModelConfig;
  audioTokenId: number;
  defaulted: string[];
  tiedEmbeddings: boolean;
}

export function hfModelConfig(
  family: HfFamily,
  json: Json,
  file: string,
  generation?: Json,
  name = family.modelType,
): HfConfigInfo {
  try {
    return build(family, json, generation, name);
  } catch (e) {
    if (e instanceof ConfigFieldError)
      throw new ModelLoadError(file, `${e.message} (a ${family.modelType} config.json as ${family.example} has it)`);
    throw e;
  }
}

function build(family: HfFamily, json: Json, generation: Json | undefined, name: string): HfConfigInfo {
  const text = family.textConfig(json);
  const defaulted: string[] = [];
  const field = (key: string): unknown => {
    if (text[key] !== undefined && text[key] !== null) return text[key];
    defaulted.push(key);
    return family.textDefaults[key];
  };
  const int = (key: string): number => {
    const v = field(key);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
      throw new ConfigFieldError(`text config field "${key}" must be a positive integer, got ${JSON.stringify(v)}`);
    return v;
  };
  const pos = (v: unknown, key: string): number => {
    if (typeof v !== 'number' || !(v > 0))
      throw new ConfigFieldError(`text config field "${key}" must be a positive number, got ${JSON.stringify(v)}`);
    return v;
  };
  const hidden = int('hidden_size');
  const heads = int('num_attention_heads');
  const kvHeads = int('num_key_value_heads');
  // Qwen2 derives head_dim as hidden/heads when the config has none; Voxtral's default is 128.
  const headDim = field('head_dim') !== undefined ? int('head_dim') : hidden / heads;
  if (!Number.isInteger(headDim))
    throw new ConfigFieldError(
      `hidden_size ${hidden} is not a multiple of num_attention_heads ${heads} and there is no head_dim`,
    );
  if (heads % kvHeads !== 0)
    throw new ConfigFieldError(`num_attention_heads (${heads}) must be a multiple of num_key_value_heads (${kvHeads})`);
  if (headDim % 2 !== 0) throw new ConfigFieldError(`head_dim (${headDim}) must be even for RoPE`);
  const act = field('hidden_act');
  if (act !== family.hiddenAct)
    throw new ConfigFieldError(
      `hidden_act ${JSON.stringify(act)} is not supported (the decoder implements ${family.hiddenAct})`,
    );
  if (text['attention_bias'] !== undefined && text['attention_bias'] !== family.attentionBias) {
    throw new ConfigFieldError(
      `attention_bias ${JSON.stringify(text['attention_bias'])} differs from the ${family.modelType} decoder (${family.attentionBias})`,
    );
  }
  const vocab = int('vocab_size');
  const tok = family.tokens(json, text, generation);
  const stop = [...tok.stop];
  // generation_config.json may add stop ids (Qwen lists <|endoftext|> and <|im_end|>).
  for (const t of generation ? tokenIds(generation, 'eos_token_id') : []) if (!stop.includes(t)) stop.push(t);
  for (const t of [tok.bos, tok.eos, tok.pad, tok.audio, ...stop]) {
    if (!(t >= 0 && t < vocab))
      throw new ConfigFieldError(`token id ${t} is outside the vocabulary (vocab_size ${vocab})`);
  }
  const tie = text['tie_word_embeddings'] ?? json['tie_word_embeddings'];
  if (typeof tie !== 'boolean') defaulted.push('tie_word_embeddings');
  const config: ModelConfig = {
    name,
    vocabSize: vocab,
    hiddenSize: hidden,
    intermediateSize: int('intermediate_size'),
    numLayers: int('num_hidden_layers'),
    numHeads: heads,
    numKvHeads: kvHeads,
    headDim,
    ropeTheta: ropeTheta(text, family, defaulted),
    rmsNormEps: pos(field('rms_norm_eps'), 'rms_norm_eps'),
    maxPositions: int('max_position_embeddings'),
    tokens: { bos: tok.bos, eos: tok.eos, pad: tok.pad },
    // The prompt comes from the folder's tokenizer (src/model/text/prompt.ts); see loader.ts.
    prefix: [],
    instruction: [],
    stopTokens: stop,
    attentionBias: family.attentionBias,
    audio: whisperAudio(family, json),
  };
  const widths = kernelWidthFault(config);
  if (widths) throw new ConfigFieldError(widths);
  return {
    config,
    audioTokenId: tok.audio,
    defaulted,
    tiedEmbeddings: typeof tie === 'boolean' ? tie : family.tiedByDefault,
  };
}

/** `rope_parameters.rope_theta` (v5), `rope_theta`, then the default; only plain RoPE (M-RoPE is 1-D for audio and text). */
function ropeTheta(text: Json, family: HfFamily, defaulted: string[]): number {
  const params = (text['rope_parameters'] ?? text['rope_scaling']) as Json | null | undefined;
  if (params && typeof params === 'object') {
    const type = params['rope_type'] ?? params['type'];
    if (type !== undefined && type !== 'default' && type !== 'mrope') {
      throw new ConfigFieldError(`RoPE scaling "${String(type)}" is not supported (only plain RoPE)`);
    }
  }
  const theta = (params && typeof params === 'object' ? params['rope_theta'] : undefined) ?? text['rope_theta'];
  if (theta === undefined) defaulted.push('rope_theta');
  const v = theta ?? family.textDefaults['rope_theta'];
  if (typeof v !== 'number' || !(v > 1))
    throw new ConfigFieldError(`rope_theta must be a number > 1, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The Whisper front-end all three families share (16 kHz, 25 ms Hann window, 10 ms hop,
 * 128 mel bins from audio_config), with the family's frames per token. The mel
 * normalisation fields follow Whisper's log10 scaling ((log10 + 4) / 4, floor 1e-10); the
 * Whisper front-end itself lives in src/audio/whisper-mel.ts.
 */
function whisperAudio(family: HfFamily, json: Json): AudioConfig {
  const a = family.audioConfig(json);
  const mels = typeof a['num_mel_bins'] === 'number' ? (a['num_mel_bins'] as number) : 128;
  const sampleRate = 16000;
  const hopLength = 160;
  return {
    sampleRate,
    nFft: 400,
    winLength: 400,
    hopLength,
    nMels: mels,
    fMin: 0,
    fMax: 8000,
    melFloor: 1e-10,
    melMean: -4,
    melStd: 4,
    framesPerToken: family.framesPerToken,
    tokensPerSecond: sampleRate / hopLength / family.framesPerToken,
    encoderWindowFrames: family.encoderWindowFrames(json),
  };
}
