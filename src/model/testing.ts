/**
 * Deterministic random models for tests and benchmarks: the shipped model's shapes
 * with seeded weights, so kernel and parity tests run at shipped scale before (and
 * independently of) the trained weights.
 */
import { parseConfig, type ModelConfig } from './config.js';
import { assembleWeights, type DecoderWeights } from './weights.js';

/** The shapes of public/models/wnw-ref (kept in step with its config.json by a test). */
export function referenceConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  const base = parseConfig({
    name: 'wnw-ref-random',
    vocab_size: 512,
    hidden_size: 192,
    intermediate_size: 512,
    num_layers: 4,
    num_heads: 16,
    num_kv_heads: 8,
    head_dim: 32,
    rope_theta: 10000,
    rms_norm_eps: 1e-5,
    max_positions: 16384,
    tokens: { bos: 1, eos: 2, pad: 0 },
    instruction: [3, 4, 5],
    audio: {
      sample_rate: 16000, n_fft: 512, win_length: 400, hop_length: 160, n_mels: 80,
      f_min: 0, f_max: 8000, mel_floor: 1e-6, mel_mean: 0, mel_std: 1,
      frames_per_token: 8, tokens_per_second: 12.5, encoder_window_frames: 3000,
    },
  });
  return { ...base, ...overrides };
}

/** mulberry32: small, fast, deterministic. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Uniform in [-scale, scale). */
export function randomArray(n: number, scale: number, rand: () => number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (rand() * 2 - 1) * scale;
  return a;
}

/**
 * Decoder shapes of the paper's backbones in miniature, on the reference model's config
 * (the ratios that bite, not the sizes): Voxtral's head_dim ≠ hidden/heads and
 * 4-token prefix; Qwen2.5-Omni's grouped-query attention (16:2, 8 query heads per KV head)
 * with q/k/v biases at 25 audio tokens/s; Qwen2-Audio's multi-head attention with biases.
 * Prefixes, instructions and stop tokens are arbitrary ids of the small vocabulary.
 */
export type DecoderShape = 'voxtral' | 'qwen2_5_omni' | 'qwen2_audio';

export function decoderShapeConfig(shape: DecoderShape): ModelConfig {
  const base = referenceConfig();
  const qwenAudio = { ...base.audio, framesPerToken: 4, tokensPerSecond: 25 };
  const tokens = { bos: 1, eos: 2, pad: 0 };
  switch (shape) {
    case 'voxtral':
      return referenceConfig({
        name: 'voxtral-shaped', vocabSize: 384, hiddenSize: 96, intermediateSize: 256, numLayers: 4,
        numHeads: 4, numKvHeads: 2, headDim: 32, ropeTheta: 1e8, tokens,
        prefix: [1, 3, 25, 24], instruction: [4, 300, 301, 34], stopTokens: [2], attentionBias: false,
      });
    case 'qwen2_5_omni':
      return referenceConfig({
        name: 'qwen2.5-omni-shaped', vocabSize: 400, hiddenSize: 256, intermediateSize: 384, numLayers: 4,
        numHeads: 16, numKvHeads: 2, headDim: 16, ropeTheta: 1e6, rmsNormEps: 1e-6, tokens: { bos: 390, eos: 391, pad: 390 },
        prefix: [392, 10, 11, 393, 394], instruction: [395, 12, 13, 14, 391, 392, 15], stopTokens: [391, 390], attentionBias: true,
        audio: qwenAudio,
      });
    case 'qwen2_audio':
      return referenceConfig({
        name: 'qwen2-audio-shaped', vocabSize: 320, hiddenSize: 64, intermediateSize: 176, numLayers: 2,
        numHeads: 4, numKvHeads: 4, headDim: 16, tokens: { bos: 310, eos: 311, pad: 310 },
        prefix: [312, 20, 21, 313, 22, 314], instruction: [315, 23, 24, 311, 312, 25], stopTokens: [311, 310], attentionBias: true,
        audio: qwenAudio,
      });
  }
}

/** Weights scaled like a trained model's (1/sqrt(fan-in)), norms near 1, biases around 0. */
export function randomDecoderWeights(config: ModelConfig, seed = 1): DecoderWeights {
  const rand = rng(seed);
  return assembleWeights(config, (name, shape) => {
    const n = shape.reduce((a, b) => a * b, 1);
    if (name.endsWith('.bias')) return randomArray(n, 0.5, rand);
    if (shape.length === 1) {
      const w = randomArray(n, 0.1, rand);
      for (let i = 0; i < n; i++) w[i] += 1;
      return w;
    }
    const fanIn = shape[1];
    return randomArray(n, name.startsWith('embed') ? 1 : Math.sqrt(3 / fanIn), rand);
  });
}

/** Random audio embeddings [n, hiddenSize] at the scale of token embeddings. */
export function randomEmbeddings(config: ModelConfig, n: number, seed = 2): Float32Array {
  return randomArray(n * config.hiddenSize, 1, rng(seed));
}
