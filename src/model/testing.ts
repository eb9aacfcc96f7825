/**
 * Deterministic random models for tests and benchmarks: the shipped model's shapes
 * with seeded weights, so kernel and parity tests run at shipped scale before (and
 * independently of) the trained weights.
 */
import { parseConfig, type ModelConfig } from './config.js';
import { familyFor, FAMILIES } from './families/registry.js';
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
      sample_rate: 16000,
      n_fft: 512,
      win_length: 400,
      hop_length: 160,
      n_mels: 80,
      f_min: 0,
      f_max: 8000,
      mel_floor: 1e-6,
      mel_mean: 0,
      mel_std: 1,
      frames_per_token: 8,
      tokens_per_second: 12.5,
      encoder_window_frames: 3000,
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

/** A family's model_type, naming its decoder in miniature (the family record's `shapes.miniature`). */
export type DecoderShape = string;

/**
 * The decoder of `shape`'s family in miniature, on the reference model's config, at the
 * family's audio token rate.
 */
export function decoderShapeConfig(shape: DecoderShape): ModelConfig {
  const family = familyFor(shape);
  if (!family)
    throw new RangeError(
      `no model family ${JSON.stringify(shape)}; known: ${FAMILIES.map((f) => f.modelType).join(', ')}`,
    );
  const base = referenceConfig();
  const a = base.audio;
  const audio = {
    ...a,
    framesPerToken: family.framesPerToken,
    tokensPerSecond: a.sampleRate / a.hopLength / family.framesPerToken,
  };
  return referenceConfig({ audio, ...family.shapes.miniature });
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
