/**
 * Voxtral (mistralai/Voxtral-Mini-3B-2507, HF format): a Whisper encoder, a 4-frame-stacking
 * projector and a Llama decoder with head_dim 128 while hidden/heads is 96. Defaults are
 * VoxtralConfig's text defaults over LlamaConfig's; ids from mistral-common's Tekkenizer.
 */
import { obj } from './common.js';
import type { HfFamily } from './types.js';

export const voxtral: HfFamily = {
  modelType: 'voxtral',
  example: 'mistralai/Voxtral-Mini-3B-2507',
  textConfig: (j) => obj(j, 'text_config'),
  textDefaults: {
    // VoxtralConfig._default_text_config_kwargs ...
    vocab_size: 131072, hidden_size: 3072, intermediate_size: 8192, num_hidden_layers: 30, num_key_value_heads: 8,
    max_position_embeddings: 131072, rms_norm_eps: 1e-5, rope_theta: 1e8, head_dim: 128,
    // ... over LlamaConfig's.
    num_attention_heads: 32, hidden_act: 'silu', tie_word_embeddings: false, attention_bias: false, mlp_bias: false,
  },
  hiddenAct: 'silu',
  attentionBias: false,
  decoderPrefix: 'language_model.model.',
  lmHead: 'language_model.lm_head.weight',
  tiedByDefault: false,
  encoderPrefixes: ['audio_tower.', 'multi_modal_projector.'],
  ignoredPrefixes: [],
  framesPerToken: 8,
  encoderWindowFrames: () => 3000,
  audioConfig: (j) => obj(j, 'audio_config'),
  tokens: (j) => ({
    audio: typeof j['audio_token_id'] === 'number' ? (j['audio_token_id'] as number) : 24,
    bos: 1,
    eos: 2,
    pad: 11,
    stop: [2],
  }),
};
