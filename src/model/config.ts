/**
 * The model's shapes, token ids and audio front-end parameters, read from config.json.
 * Nothing else in the runtime hard-codes a shape: every buffer size, every kernel
 * constant and every segment length is derived from this object.
 */
import { ModelLoadError } from '../errors.js';

export type { AudioConfig } from '../audio/mel.js';
import type { AudioConfig } from '../audio/mel.js';

export interface TokenIds {
  bos: number;
  eos: number;
  pad: number;
}

export interface ModelConfig {
  name: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  maxPositions: number;
  tokens: TokenIds;
  /**
   * Prompt layout: [prefix][audio tokens][instruction][transcript][stop]. The prefix is
   * [bos] for the reference model and e.g. `<s>[INST][BEGIN_AUDIO]` for Voxtral; audio
   * position p sits at sequence position prefix.length + p.
   */
  prefix: number[];
  instruction: number[];
  /** Tokens that end generation (eos first; Qwen adds `<|im_end|>`, `<|endoftext|>`). */
  stopTokens: number[];
  /** q/k/v projections carry biases (Qwen2 family); o_proj never does. */
  attentionBias: boolean;
  audio: AudioConfig;
}

/**
 * The prompt's token ids around the audio. A config carries the prompt it was loaded
 * with; a transcription in another language brings its own (SessionOptions.prompt), so
 * the shared config never changes under a running session.
 */
export interface PromptIds {
  readonly prefix: readonly number[];
  readonly instruction: readonly number[];
}

/** The prompt with `suffix` appended after its instruction: the triage's teacher forcing (its rows predict the answer). */
export function teacherForced(p: PromptIds, suffix: readonly number[]): PromptIds {
  return { prefix: p.prefix, instruction: [...p.instruction, ...suffix] };
}

/** Where audio position 0 sits in the prompt. */
export function audioStart(p: PromptIds): number {
  return p.prefix.length;
}

/** Prompt length for `audioLength` audio tokens: prefix + audio + instruction. */
export function promptLength(p: PromptIds, audioLength: number): number {
  return p.prefix.length + audioLength + p.instruction.length;
}

/** True when `token` ends generation. */
export function isStop(c: ModelConfig, token: number): boolean {
  return c.stopTokens.includes(token);
}

/** Query heads per KV head (grouped-query attention). */
export function groupSize(c: ModelConfig): number {
  return c.numHeads / c.numKvHeads;
}

/** Number of (layer, KV head) pairs: the unit every KV policy works on. */
export function kvHeadCount(c: ModelConfig): number {
  return c.numLayers * c.numKvHeads;
}

/** WnW's 2-second segment in audio tokens: n_s = ceil(2 s * r). */
export function segmentLength(c: ModelConfig, seconds = 2): number {
  return Math.ceil(seconds * c.audio.tokensPerSecond);
}

type Json = Record<string, unknown>;

function num(obj: Json, key: string, file: string, opts: { int?: boolean; min?: number } = {}): number {
  const v = obj[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new ModelLoadError(
      file,
      `field "${key}" must be a finite number, ${v === undefined ? 'but it is missing' : `got ${JSON.stringify(v)}`}`,
    );
  }
  if (opts.int && !Number.isInteger(v)) throw new ModelLoadError(file, `field "${key}" must be an integer, got ${v}`);
  if (opts.min !== undefined && v < opts.min)
    throw new ModelLoadError(file, `field "${key}" must be >= ${opts.min}, got ${v}`);
  return v;
}

function obj(o: Json, key: string, file: string): Json {
  const v = o[key];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ModelLoadError(file, `field "${key}" must be an object`);
  }
  return v as Json;
}

/** Parses and validates config.json (snake_case, as written by training/export.py). */
export function parseConfig(json: unknown, file = 'config.json'): ModelConfig {
  if (typeof json !== 'object' || json === null) throw new ModelLoadError(file, 'not a JSON object');
  const j = json as Json;
  const int = { int: true, min: 1 };
  const tok = obj(j, 'tokens', file);
  const a = obj(j, 'audio', file);
  const instruction = j['instruction'];
  if (!Array.isArray(instruction) || !instruction.every((t) => Number.isInteger(t))) {
    throw new ModelLoadError(file, 'field "instruction" must be an array of token ids');
  }
  const parsed: Omit<ModelConfig, 'prefix' | 'stopTokens'> = {
    name: typeof j['name'] === 'string' ? (j['name'] as string) : 'unnamed',
    vocabSize: num(j, 'vocab_size', file, int),
    hiddenSize: num(j, 'hidden_size', file, int),
    intermediateSize: num(j, 'intermediate_size', file, int),
    numLayers: num(j, 'num_layers', file, int),
    numHeads: num(j, 'num_heads', file, int),
    numKvHeads: num(j, 'num_kv_heads', file, int),
    headDim: num(j, 'head_dim', file, int),
    ropeTheta: num(j, 'rope_theta', file, { min: 1 }),
    rmsNormEps: num(j, 'rms_norm_eps', file, { min: 0 }),
    maxPositions: num(j, 'max_positions', file, int),
    tokens: {
      bos: num(tok, 'bos', file, { int: true, min: 0 }),
      eos: num(tok, 'eos', file, { int: true, min: 0 }),
      pad: num(tok, 'pad', file, { int: true, min: 0 }),
    },
    instruction: instruction as number[],
    attentionBias: false,
    audio: {
      sampleRate: num(a, 'sample_rate', file, int),
      nFft: num(a, 'n_fft', file, int),
      winLength: num(a, 'win_length', file, int),
      hopLength: num(a, 'hop_length', file, int),
      nMels: num(a, 'n_mels', file, int),
      fMin: num(a, 'f_min', file, { min: 0 }),
      fMax: num(a, 'f_max', file, { min: 0 }),
      melFloor: num(a, 'mel_floor', file, { min: 0 }),
      melMean: num(a, 'mel_mean', file),
      melStd: num(a, 'mel_std', file, { min: 1e-12 }),
      framesPerToken: num(a, 'frames_per_token', file, int),
      tokensPerSecond: num(a, 'tokens_per_second', file, { min: 1e-6 }),
      encoderWindowFrames: num(a, 'encoder_window_frames', file, int),
    },
  };
  const c: ModelConfig = { ...parsed, prefix: [parsed.tokens.bos], stopTokens: [parsed.tokens.eos] };
  const bad = (msg: string): never => {
    throw new ModelLoadError(file, msg);
  };
  if (c.numHeads % c.numKvHeads !== 0)
    bad(`num_heads (${c.numHeads}) must be a multiple of num_kv_heads (${c.numKvHeads})`);
  if (c.headDim % 2 !== 0) bad(`head_dim (${c.headDim}) must be even for RoPE`);
  const widths = kernelWidthFault(c);
  if (widths) bad(widths);
  if ((c.audio.nFft & (c.audio.nFft - 1)) !== 0) bad(`audio.n_fft (${c.audio.nFft}) must be a power of two`);
  if (c.audio.winLength > c.audio.nFft) bad('audio.win_length must not exceed n_fft');
  if (c.audio.encoderWindowFrames % c.audio.framesPerToken !== 0)
    bad('audio.encoder_window_frames must be a multiple of frames_per_token');
  const rate = c.audio.sampleRate / c.audio.hopLength / c.audio.framesPerToken;
  if (Math.abs(rate - c.audio.tokensPerSecond) > 1e-6)
    bad(
      `audio.tokens_per_second (${c.audio.tokensPerSecond}) disagrees with sample_rate/hop_length/frames_per_token (${rate})`,
    );
  for (const [k, v] of Object.entries(c.tokens))
    if (v >= c.vocabSize) bad(`tokens.${k} (${v}) is outside the vocabulary (${c.vocabSize})`);
  for (const t of c.instruction) if (t < 0 || t >= c.vocabSize) bad(`instruction token ${t} is outside the vocabulary`);
  return c;
}

/**
 * A decoder width the weight kernels cannot read: every matrix's K (hidden_size,
 * intermediate_size, num_heads × head_dim) is read in groups of 4, and sizes past 2^31 are
 * no model's; undefined when all fit.
 */
export function kernelWidthFault(
  c: Pick<ModelConfig, 'hiddenSize' | 'intermediateSize' | 'numHeads' | 'headDim'>,
): string | undefined {
  const widths: [string, number][] = [
    ['hidden_size', c.hiddenSize],
    ['intermediate_size', c.intermediateSize],
    ['num_heads × head_dim', c.numHeads * c.headDim],
  ];
  for (const [name, v] of widths) {
    if (!(v <= 2 ** 31)) return `${name} (${v}) is larger than any decoder this runtime reads (at most 2^31)`;
    if (v % 4 !== 0)
      return `${name} (${v}) must be a multiple of 4: the decoder's kernels read matrix rows in groups of 4`;
  }
  return undefined;
}

/**
 * The decoder's tensors with their shapes, as training/export.py names them
 * (PyTorch Linear layout: [out, in], row-major). Weight loading checks against this;
 * a Hugging Face family maps its own names onto these (src/model/families/).
 */
export function decoderTensorShapes(c: ModelConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  const D = c.hiddenSize;
  const qd = c.numHeads * c.headDim;
  const kvd = c.numKvHeads * c.headDim;
  m.set('embed_tokens.weight', [c.vocabSize, D]);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `layers.${l}.`;
    m.set(p + 'attn_norm.weight', [D]);
    m.set(p + 'q_proj.weight', [qd, D]);
    m.set(p + 'k_proj.weight', [kvd, D]);
    m.set(p + 'v_proj.weight', [kvd, D]);
    m.set(p + 'o_proj.weight', [D, qd]);
    if (c.attentionBias) {
      m.set(p + 'q_proj.bias', [qd]);
      m.set(p + 'k_proj.bias', [kvd]);
      m.set(p + 'v_proj.bias', [kvd]);
    }
    m.set(p + 'mlp_norm.weight', [D]);
    m.set(p + 'gate_proj.weight', [c.intermediateSize, D]);
    m.set(p + 'up_proj.weight', [c.intermediateSize, D]);
    m.set(p + 'down_proj.weight', [D, c.intermediateSize]);
  }
  m.set('norm.weight', [D]);
  m.set('lm_head.weight', [c.vocabSize, D]);
  return m;
}
