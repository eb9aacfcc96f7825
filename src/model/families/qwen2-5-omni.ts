/**
 * Qwen2.5-Omni (Qwen/Qwen2.5-Omni-3B), thinker only: a Whisper-style encoder that attends
 * in 2 s windows and projects to the decoder width itself, and a Qwen2 decoder (q/k/v
 * biases, GQA 16:2). Its M-RoPE has three identical position components for audio and
 * text, so it is ordinary 1-D RoPE here. Talker, vocoder and vision tower are not loaded.
 */
import { obj, tokenId } from './common.js';
import type { HfFamily } from './types.js';

const thinker = (j: Record<string, unknown>) => obj(j, 'thinker_config');

export const qwen25Omni: HfFamily = {
  modelType: 'qwen2_5_omni',
  example: 'Qwen/Qwen2.5-Omni-3B',
  textConfig: (j) => obj(thinker(j), 'text_config'),
  // Qwen2_5OmniTextConfig's defaults (the 7B's sizes).
  textDefaults: {
    vocab_size: 152064, hidden_size: 3584, intermediate_size: 18944, num_hidden_layers: 28, num_attention_heads: 28,
    num_key_value_heads: 4, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6,
    rope_theta: 1000000, tie_word_embeddings: false,
  },
  hiddenAct: 'silu',
  attentionBias: true,
  decoderPrefix: 'thinker.model.',
  lmHead: 'thinker.lm_head.weight',
  // Whether the 3B checkpoint stores thinker.lm_head is unverified: fall back to the embedding.
  tiedByDefault: true,
  encoderPrefixes: ['thinker.audio_tower.'],
  ignoredPrefixes: ['thinker.visual.', 'talker.', 'token2wav.'],
  framesPerToken: 4,
  encoderWindowFrames: (j) => {
    const a = obj(thinker(j), 'audio_config');
    return 2 * (typeof a['n_window'] === 'number' ? (a['n_window'] as number) : 100);
  },
  audioConfig: (j) => obj(thinker(j), 'audio_config'),
  tokens: (j) => {
    const t = thinker(j);
    return {
      audio: tokenId(t, 'audio_token_index', tokenId(t, 'audio_token_id', 151646)),
      bos: 151643,
      eos: 151645, // <|im_end|>
      pad: tokenId(t, 'pad_token_id', 151643),
      stop: [151645, 151643],
    };
  },
};
