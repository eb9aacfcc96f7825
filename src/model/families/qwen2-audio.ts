/**
 * Qwen2-Audio (Qwen/Qwen2-Audio-7B-Instruct): a Whisper encoder with 2x average pooling,
 * a linear projector with bias and a Qwen2 decoder (q/k/v biases, MHA). The real
 * text_config lists only a few keys; the rest are Qwen2Config's defaults, copied here.
 */
import { obj, tokenId } from './common.js';
import type { HfFamily } from './types.js';

export const qwen2Audio: HfFamily = {
  modelType: 'qwen2_audio',
  example: 'Qwen/Qwen2-Audio-7B-Instruct',
  textConfig: (j) => obj(j, 'text_config'),
  // Qwen2Config (num_key_value_heads defaults to 32, not to num_attention_heads).
  textDefaults: {
    vocab_size: 151936, hidden_size: 4096, intermediate_size: 22016, num_hidden_layers: 32, num_attention_heads: 32,
    num_key_value_heads: 32, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6,
    tie_word_embeddings: false, rope_theta: 10000,
  },
  hiddenAct: 'silu',
  attentionBias: true,
  decoderPrefix: 'language_model.model.',
  lmHead: 'language_model.lm_head.weight',
  tiedByDefault: false,
  encoderPrefixes: ['audio_tower.', 'multi_modal_projector.'],
  ignoredPrefixes: [],
  framesPerToken: 4,
  // At most one 30 s clip per audio item; longer audio is split into clips.
  encoderWindowFrames: () => 3000,
  audioConfig: (j) => obj(j, 'audio_config'),
  tokens: (j, text) => {
    const eos = tokenId(text, 'eos_token_id', 151645); // <|im_end|>
    const endOfText = tokenId(text, 'bos_token_id', 151643); // <|endoftext|>
    return {
      audio: tokenId(j, 'audio_token_index', tokenId(j, 'audio_token_id', 151646)),
      bos: endOfText,
      eos,
      pad: endOfText,
      stop: eos === endOfText ? [eos] : [eos, endOfText],
    };
  },
};
