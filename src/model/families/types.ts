/**
 * A Hugging Face model family as one record: everything that differs between the speech
 * LLMs this runtime reads, as data. The registry resolves config.json's model_type to a
 * record once; from there the record itself travels (LoadedModel.family) to the config
 * mapping (src/model/hf/config.ts), the tensor plan (hf/load.ts), the prompt
 * (src/model/text/prompt.ts), the ONNX encoder (hf/onnx-audio.ts) and the audio route
 * (src/route/), none of which names a family.
 */
import type { WhisperPadding } from '../../audio/whisper-mel.js';
import type { ModelConfig } from '../config.js';
import type { PromptRecipe } from '../text/prompt.js';

export type Json = Record<string, unknown>;

/** One step after the encoder layers, applied to the concatenated frames of an example. */
export type PostStep =
  | { op: 'layernorm'; name: string }
  | { op: 'avgpool'; size: 2 }
  | { op: 'stack'; size: number }
  | { op: 'linear'; name: string; bias: boolean }
  | { op: 'gelu' };

/**
 * What differs between the Whisper-family audio encoders: where the tensors live, how
 * positions are made, the attention window, how padding frames are treated, and the steps
 * from the last layer to the decoder's audio embeddings (pooling and projector).
 */
export interface WhisperFamilySpec {
  /** The family's name in the encoder's messages. */
  family: string;
  /** Prefix of the encoder's tensors in the checkpoint. */
  prefix: string;
  /** Stored `embed_positions.weight`, or Whisper sinusoids computed at load time. */
  positions: 'stored' | 'sinusoids';
  /** Mel frames per attention window; positions restart in every window. */
  windowFrames: number;
  /**
   * The audio_config key that states half the window (n_window), where the upstream
   * encoder reads its window from the config: a value other than windowFrames / 2 is
   * refused, since the window is what this encoder implements.
   */
  halfWindowKey?: string;
  /**
   * Frames past the audio (the front-end's validFrames): 'encode' treats them as audio;
   * 'mask-keys' convolves them but masks them as attention keys and keeps only the valid
   * tokens; 'drop' cuts them before windowing.
   */
  padding: 'encode' | 'mask-keys' | 'drop';
  /** A window shorter than windowFrames is an error ('exact') or encoded as is ('tail'). */
  windows: 'exact' | 'tail';
  post: PostStep[];
}

/** One feature-extractor example: its own log-mel (and max) over `x`, padded as `pad` says. */
export interface ProcessorExample {
  x: Float32Array;
  pad: WhisperPadding;
}

/**
 * An ONNX audio encoder exported for transformers.js: the input takes whole chunks of the
 * log-mel of the recording zero-padded to a multiple of `chunkSamples`; each chunk gives
 * `rowsPerChunk` rows of the output (the projector is inside the graph).
 */
export interface OnnxAudioLayout {
  input: string;
  output: string;
  nMels: number;
  chunkSamples: number;
  chunkFrames: number;
  rowsPerChunk: number;
}

/** The released checkpoint as the memory bench sizes it (no weights read). */
export interface ReleasedShape {
  name: string;
  /** The text part of the released config.json (sparse where the real one is). */
  json: Json;
  /** Audio tokens the prompt holds for a recording of this length. */
  audioTokens(seconds: number): number;
}

/** An audio length the model card states for a task, which no config holds. */
export interface StatedLimit {
  minutes: number;
  task: string;
}

/**
 * Text a chat model puts around the transcript in its answer ("The original content of
 * this audio is: '…'"): `before` opens the answer and `after` ends it ('' for nothing).
 * Case is ignored and a space matches any whitespace or none (src/transcribe/reply.ts).
 */
export interface ReplyWrapper {
  before: string;
  after: string;
}

/** Shapes the tests and benches take from the record, so that no file outside families/ restates a family. */
export interface FamilyShapes {
  /**
   * The decoder in miniature over the reference model's config: the ratios that bite
   * (head_dim against hidden/heads, query heads per KV head, biases), not the sizes;
   * prompt and stop ids are arbitrary ids of the small vocabulary.
   */
  miniature: Partial<ModelConfig>;
  /** The released decoder's per-layer shapes for the decode bench (`--shape <key>`). */
  decodeBench?: { key: string; config: Partial<ModelConfig>; totalLayers: number };
  released?: ReleasedShape;
  /** The decoder width the released projector writes, for the encoder bench (`--family`). */
  encoderBench?: { decoderWidth: number };
}

export interface HfFamily {
  /** config.json's model_type. */
  modelType: string;
  /** The checkpoint a user downloads, for messages. */
  example: string;
  /** The decoder's config object inside config.json (text_config, thinker_config.text_config). */
  textConfig(json: Json): Json;
  /** Upstream class defaults for every key the loader reads, used when the text config omits it. */
  textDefaults: Json;
  /** Activation of the MLP the runtime implements (SwiGLU). */
  hiddenAct: 'silu';
  /** q/k/v projections carry biases; o_proj never does. */
  attentionBias: boolean;
  /** Prefix of the decoder's tensors (`language_model.model.`, `thinker.model.`). */
  decoderPrefix: string;
  /** The output projection's tensor; when absent and the config ties it, embed_tokens is used. */
  lmHead: string;
  /** Whether a missing lm_head falls back to the embedding when the config says nothing. */
  tiedByDefault: boolean;
  /** Tensors of the audio encoder and projector: part of the folder, loaded by src/encoder. */
  encoderPrefixes: string[];
  /** Tensors the runtime never loads (vision tower, speech generator, vocoder). */
  ignoredPrefixes: string[];
  /** Mel frames per audio token (8: 12.5 tokens/s; 4: 25 tokens/s). */
  framesPerToken: number;
  /** Mel frames the encoder attends within, as the folder's config states it. */
  encoderWindowFrames(json: Json): number;
  /** The audio encoder's config object. */
  audioConfig(json: Json): Json;
  /**
   * Token ids: the audio placeholder, bos/eos/pad and stop tokens (eos first), read from the
   * folder's config (`text` is textConfig(json); `generation` is generation_config.json).
   */
  tokens(
    json: Json,
    text: Json,
    generation?: Json,
  ): { audio: number; bos: number; eos: number; pad: number; stop: number[] };
  /** The checkpoint's audio tower and projector. */
  encoder: WhisperFamilySpec;
  /**
   * How the upstream processor cuts a recording into feature-extractor examples; `nSamples`
   * is the extractor's n_samples (preprocessor_config.json).
   */
  processor(samples: Float32Array, nSamples: number): ProcessorExample[];
  /** The transcription prompt around the audio. */
  prompt: PromptRecipe;
  /** The layout of an onnx-community audio encoder export; absent: such a graph is refused. */
  onnx?: OnnxAudioLayout;
  /**
   * Audio lengths the model card states (Voxtral: 30 min transcription, 40 understanding):
   * a longer recording still runs, since the positions may hold it, but with a warning.
   */
  statedLimits?: StatedLimit[];
  /**
   * Wrappers the model's answers are known to come in: taken off the transcript (and the
   * streamed text), the raw answer kept as TranscriptionResult.rawText. Absent: none.
   */
  replyWrappers?: readonly ReplyWrapper[];
  shapes: FamilyShapes;
}
