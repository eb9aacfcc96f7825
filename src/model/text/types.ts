/**
 * The text side of a model as the runtime sees it, whatever the file format: the reference
 * model's SentencePiece tokenizer.json, a Hugging Face tokenizer.json (Qwen's byte-level
 * BPE, a converted Voxtral tokenizer) or Voxtral's native tekken.json.
 */
export interface TokenStream {
  /** Text this token adds; incomplete UTF-8 is held back until its sequence completes. */
  push(id: number): string;
  /** Whatever is still held back (an incomplete sequence becomes U+FFFD). */
  flush(): string;
}

export type TokenizerFormat = 'sentencepiece' | 'hf' | 'tekken';

export interface TextTokenizer {
  readonly format: TokenizerFormat;
  /** One past the largest id the tokenizer defines (the model's vocabulary may be larger). */
  readonly vocabSize: number;
  /** Beginning / end of sequence ids, where the tokenizer defines them. */
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  /**
   * Token ids of `text`. Hugging Face tokenizers match special-token strings inside the
   * text (as transformers does, which chat templates rely on); Tekken encodes text only,
   * as mistral-common does, so special tokens are placed by id.
   */
  encode(text: string, opts?: { bos?: boolean; eos?: boolean }): number[];
  /** Text of `ids`, special and control tokens skipped. */
  decode(ids: ArrayLike<number>): string;
  /** Streaming decode: the pushes and the final flush concatenate to `decode(ids)`. */
  decoder(): TokenStream;
  /** Id of a special (or plain) token given its string, e.g. "<|im_end|>" or "[AUDIO]". */
  tokenId(token: string): number | undefined;
  /** True for special/control tokens, which decoding skips. */
  isControl(id: number): boolean;
  /** The text one token renders on its own ("" for control tokens); word starts carry a leading space. */
  pieceText(id: number): string;
}
