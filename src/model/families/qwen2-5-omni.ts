/**
 * Qwen2.5-Omni (Qwen/Qwen2.5-Omni-3B), thinker only: a Whisper-style encoder that attends
 * in 2 s windows and projects to the decoder width itself, and a Qwen2 decoder (q/k/v
 * biases, GQA 16:2). Its M-RoPE has three identical position components for audio and
 * text, so it is ordinary 1-D RoPE here. Talker, vocoder and vision tower are not loaded.
 */
import { firstTokenId, languageName, obj, tokenId } from './common.js';
import { poolNormProject, QWEN_CHAT } from './qwen.js';
import { chatTurnsTemplate } from '../text/templates.js';
import type { HfFamily } from './types.js';

const thinker = (j: Record<string, unknown>) => obj(j, 'thinker_config');

export const qwen25Omni: HfFamily = {
  modelType: 'qwen2_5_omni',
  example: 'Qwen/Qwen2.5-Omni-3B',
  textConfig: (j) => obj(thinker(j), 'text_config'),
  // Qwen2_5OmniTextConfig's defaults (the 7B's sizes).
  textDefaults: {
    vocab_size: 152064,
    hidden_size: 3584,
    intermediate_size: 18944,
    num_hidden_layers: 28,
    num_attention_heads: 28,
    num_key_value_heads: 4,
    hidden_act: 'silu',
    max_position_embeddings: 32768,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    tie_word_embeddings: false,
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
  // The ids as the folder states them: thinker_config.text_config, then thinker_config (the
  // released config.json keeps eos and pad there), then generation_config.json; the
  // released ids only where none of them does.
  tokens: (j, text, generation) => {
    const t = thinker(j);
    const from = [text, t, generation];
    const eos = firstTokenId(from, 'eos_token_id', 151645); // <|im_end|>
    const pad = firstTokenId(from, 'pad_token_id', 151643); // <|endoftext|>
    return {
      audio: tokenId(t, 'audio_token_index', tokenId(t, 'audio_token_id', 151646)),
      bos: firstTokenId(from, 'bos_token_id', pad),
      eos,
      pad,
      stop: eos === pad ? [eos] : [eos, pad],
    };
  },
  encoder: {
    family: 'qwen2_5_omni',
    prefix: 'thinker.audio_tower.',
    positions: 'sinusoids',
    windowFrames: 200, // 2 × n_window (100): 2 s
    halfWindowKey: 'n_window',
    padding: 'drop',
    windows: 'tail',
    post: poolNormProject('thinker.audio_tower.ln_post', 'thinker.audio_tower.proj'),
  },
  // Qwen2_5OmniProcessor: padding="max_length" to n_samples, never truncated; the encoder
  // drops the padding frames itself.
  processor: (x, n) => [{ x, pad: { padToLength: n } }],
  prompt: {
    kind: 'chat-template',
    defaultTemplate: chatTurnsTemplate(
      '{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>',
      "part['type'] == 'audio' or 'audio' in part or 'audio_url' in part",
    ),
    system: 'You are a speech recognition model.',
    instruction: {
      withLanguage: (code) => `Transcribe the ${languageName(code)} audio into text without any punctuation marks.`,
      withoutLanguage: 'Transcribe the audio into text without any punctuation marks.',
    },
    // The Qwen cookbook's speech translation request (as its public ports reproduce it).
    translation: {
      system: 'You are a speech translation model.',
      instruction: (target, source) =>
        `Listen to the provided ${source ? `${languageName(source)} ` : ''}speech and produce a translation in ${languageName(target)} text.`,
    },
    ...QWEN_CHAT,
  },
  shapes: {
    // Grouped-query attention (16:2, 8 query heads per KV head) with q/k/v biases at 25 audio tokens/s.
    miniature: {
      name: 'qwen2.5-omni-shaped',
      vocabSize: 400,
      hiddenSize: 256,
      intermediateSize: 384,
      numLayers: 4,
      numHeads: 16,
      numKvHeads: 2,
      headDim: 16,
      ropeTheta: 1e6,
      rmsNormEps: 1e-6,
      tokens: { bos: 390, eos: 391, pad: 390 },
      prefix: [392, 10, 11, 393, 394],
      instruction: [395, 12, 13, 14, 391, 392, 15],
      stopTokens: [391, 390],
      attentionBias: true,
    },
    released: {
      name: 'Qwen2.5-Omni-3B',
      json: {
        model_type: 'qwen2_5_omni',
        thinker_config: {
          audio_token_index: 151646,
          audio_config: {
            n_window: 100,
            num_mel_bins: 128,
            d_model: 1280,
            encoder_layers: 32,
            encoder_attention_heads: 20,
            encoder_ffn_dim: 5120,
            max_source_positions: 1500,
            output_dim: 2048,
          },
          text_config: {
            vocab_size: 151936,
            hidden_size: 2048,
            intermediate_size: 11008,
            num_hidden_layers: 36,
            num_attention_heads: 16,
            num_key_value_heads: 2,
            rope_theta: 1000000,
            rms_norm_eps: 1e-6,
            max_position_embeddings: 32768,
            tie_word_embeddings: false,
          },
        },
      },
      audioTokens: (s) => Math.ceil(s * 25),
    },
  },
};
