/**
 * Voxtral (mistralai/Voxtral-Mini-3B-2507, HF format): a Whisper encoder, a 4-frame-stacking
 * projector and a Llama decoder with head_dim 128 while hidden/heads is 96. Defaults are
 * VoxtralConfig's text defaults over LlamaConfig's; ids from mistral-common's Tekkenizer.
 */
import { languageName, obj, THIRTY_SECONDS } from './common.js';
import type { HfFamily } from './types.js';

export const voxtral: HfFamily = {
  modelType: 'voxtral',
  example: 'mistralai/Voxtral-Mini-3B-2507',
  textConfig: (j) => obj(j, 'text_config'),
  textDefaults: {
    // VoxtralConfig._default_text_config_kwargs ...
    vocab_size: 131072,
    hidden_size: 3072,
    intermediate_size: 8192,
    num_hidden_layers: 30,
    num_key_value_heads: 8,
    max_position_embeddings: 131072,
    rms_norm_eps: 1e-5,
    rope_theta: 1e8,
    head_dim: 128,
    // ... over LlamaConfig's.
    num_attention_heads: 32,
    hidden_act: 'silu',
    tie_word_embeddings: false,
    attention_bias: false,
    mlp_bias: false,
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
  encoder: {
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
  },
  // VoxtralProcessor: the whole recording zero-padded to a multiple of 30 s, one example.
  processor: (x) => [{ x, pad: { padToMultipleOf: THIRTY_SECONDS } }],
  prompt: {
    kind: 'mistral-transcription',
    stop: ['</s>'],
    // No stated wording upstream: the chat request asks for the translation in words.
    translation: {
      instruction: (target, source) =>
        `Translate this ${source ? `${languageName(source)} ` : ''}audio into ${languageName(target)}.`,
    },
  },
  // onnx-community/Voxtral-Mini-3B-2507-ONNX: 30 s chunks of 3000 frames, 375 tokens each.
  onnx: {
    input: 'audio_values',
    output: 'audio_features',
    nMels: 128,
    chunkSamples: THIRTY_SECONDS,
    chunkFrames: 3000,
    rowsPerChunk: 375,
  },
  // The model card's limits: past them the positions hold the audio but the training did not.
  statedLimits: [
    { minutes: 30, task: 'transcription' },
    { minutes: 40, task: 'audio understanding' },
  ],
  shapes: {
    // head_dim ≠ hidden/heads and a 4-token prefix.
    miniature: {
      name: 'voxtral-shaped',
      vocabSize: 384,
      hiddenSize: 96,
      intermediateSize: 256,
      numLayers: 4,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 32,
      ropeTheta: 1e8,
      tokens: { bos: 1, eos: 2, pad: 0 },
      prefix: [1, 3, 25, 24],
      instruction: [4, 300, 301, 34],
      stopTokens: [2],
      attentionBias: false,
    },
    decodeBench: {
      key: 'voxtral-mini-3b',
      totalLayers: 30,
      config: {
        name: 'voxtral-mini-3b-shape',
        vocabSize: 131072,
        hiddenSize: 3072,
        intermediateSize: 8192,
        numHeads: 32,
        numKvHeads: 8,
        headDim: 128,
        ropeTheta: 1e8,
        rmsNormEps: 1e-5,
        maxPositions: 32768,
        tokens: { bos: 1, eos: 2, pad: 11 },
        prefix: [1, 3, 25],
        instruction: [4, 34],
        stopTokens: [2],
        attentionBias: false,
      },
    },
    released: {
      name: 'Voxtral-Mini-3B-2507',
      json: {
        model_type: 'voxtral',
        audio_token_id: 24,
        text_config: { model_type: 'llama' },
        audio_config: {
          num_mel_bins: 128,
          hidden_size: 1280,
          intermediate_size: 5120,
          num_hidden_layers: 32,
          num_attention_heads: 20,
          max_source_positions: 1500,
        },
      },
      // Audio is padded to whole 30 s chunks of 375 tokens.
      audioTokens: (s) => Math.ceil(s / 30) * 375,
    },
    encoderBench: { decoderWidth: 3072 },
  },
};
