/**
 * Qwen2-Audio (Qwen/Qwen2-Audio-7B-Instruct): a Whisper encoder with 2x average pooling,
 * a linear projector with bias and a Qwen2 decoder (q/k/v biases, MHA). The real
 * text_config lists only a few keys; the rest are Qwen2Config's defaults, copied here.
 */
import { languageName, obj, tokenId } from './common.js';
import { poolNormProject, QWEN_CHAT } from './qwen.js';
import { chatTurnsTemplate } from '../text/templates.js';
import type { HfFamily, ProcessorExample } from './types.js';

export const qwen2Audio: HfFamily = {
  modelType: 'qwen2_audio',
  example: 'Qwen/Qwen2-Audio-7B-Instruct',
  textConfig: (j) => obj(j, 'text_config'),
  // Qwen2Config (num_key_value_heads defaults to 32, not to num_attention_heads).
  textDefaults: {
    vocab_size: 151936,
    hidden_size: 4096,
    intermediate_size: 22016,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 32,
    hidden_act: 'silu',
    max_position_embeddings: 32768,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: false,
    rope_theta: 10000,
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
  encoder: {
    family: 'qwen2_audio',
    prefix: 'audio_tower.',
    positions: 'stored',
    windowFrames: 3000,
    padding: 'mask-keys',
    windows: 'exact',
    post: poolNormProject('audio_tower.layer_norm', 'multi_modal_projector.linear'),
  },
  // Qwen2AudioProcessor takes at most 30 s per audio item. Longer audio is encoded as
  // consecutive 30 s clips whose embeddings follow one another inside the prompt's single
  // audio span (the upstream template would give each clip its own bos/eos pair).
  processor: (x, n) => {
    const out: ProcessorExample[] = [];
    for (let s = 0; s < x.length; s += n)
      out.push({ x: x.subarray(s, Math.min(x.length, s + n)), pad: { truncateTo: n, padToLength: n } });
    return out;
  },
  prompt: {
    kind: 'chat-template',
    // The processor's template numbers each audio part "Audio k: " and ends its line.
    defaultTemplate: chatTurnsTemplate(
      'Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n',
      "'audio' in part or 'audio_url' in part or part['type'] == 'audio'",
    ),
    system: null,
    instruction: {
      withLanguage: (code) => `Detect the language and recognize the speech: <|${code}|>`,
      withoutLanguage: 'Detect the language and recognize the speech:',
    },
    // The speech translation instruction in the recognition instruction's form, as public
    // Qwen2-Audio scripts write it ("… translate the speech into German: <|en|>").
    translation: {
      system: null,
      instruction: (target, source) =>
        `Detect the language and translate the speech into ${languageName(target)}:${source ? ` <|${source}|>` : ''}`,
    },
    ...QWEN_CHAT,
  },
  // The Instruct model answers in chat form; transformers' integration test decodes
  // "The original content of this audio is: 'Mister Quiller is the apostle of …'".
  replyWrappers: [
    { before: "The original content of this audio is: '", after: "'" },
    { before: 'The original content of this audio is: "', after: '"' },
    { before: 'The original content of this audio is:', after: '' },
  ],
  shapes: {
    // Multi-head attention with q/k/v biases at 25 audio tokens/s.
    miniature: {
      name: 'qwen2-audio-shaped',
      vocabSize: 320,
      hiddenSize: 64,
      intermediateSize: 176,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 4,
      headDim: 16,
      tokens: { bos: 310, eos: 311, pad: 310 },
      prefix: [312, 20, 21, 313, 22, 314],
      instruction: [315, 23, 24, 311, 312, 25],
      stopTokens: [311, 310],
      attentionBias: true,
    },
    encoderBench: { decoderWidth: 4096 },
  },
};
