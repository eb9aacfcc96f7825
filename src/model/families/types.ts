/**
 * A Hugging Face model family as data: where its decoder config sits in config.json, the
 * upstream defaults a sparse config leaves out, its tensor names, the parts the decoder
 * never loads, its audio token rate and stop tokens. Its transcription prompt is built by
 * src/model/text/prompt.ts (recipes keyed by the same model_type). The loader
 * (src/model/hf/load.ts) turns a folder of one of these into a ModelConfig and DecoderWeights.
 */
export type Json = Record<string, unknown>;

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
  /** q/k/v projections carry biases (Qwen2); o_proj never does. */
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
  /** Audio tokens per second (12.5 Voxtral: 8 mel frames per token; 25 Qwen: 4). */
  framesPerToken: number;
  /** Mel frames the encoder attends within (Voxtral/Qwen2-Audio: a 30 s chunk; Omni: 2 s windows). */
  encoderWindowFrames(json: Json): number;
  /** The audio encoder's config object. */
  audioConfig(json: Json): Json;
  /** Token ids: the audio placeholder, bos/eos/pad and stop tokens (eos first). */
  tokens(json: Json, text: Json): { audio: number; bos: number; eos: number; pad: number; stop: number[] };
}
