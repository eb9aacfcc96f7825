/**
 * Streaming decode for tokenizers whose decoder works on whole sequences (Hugging Face
 * tokenizer.json). A byte-level token can end inside a UTF-8 character, and decoders such
 * as Metaspace change a token's text depending on its neighbours, so a token's text is
 * the difference between decoding a short window with and without it; the window starts
 * at the last point where text was emitted, which keeps each step O(window).
 */
import type { TokenStream } from './types.js';

const REPLACEMENT = '\ufffd';

export class WindowDecodeStream implements TokenStream {
  private ids: number[] = [];
  /** ids[0..readOffset) were emitted; ids[prefixOffset..readOffset) give the context. */
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly decodeIds: (ids: number[]) => string) {}

  push(id: number): string {
    this.ids.push(id);
    const prefix = this.decodeIds(this.ids.slice(this.prefixOffset, this.readOffset));
    const full = this.decodeIds(this.ids.slice(this.prefixOffset));
    // A trailing U+FFFD means the last token stopped inside a character: wait for the rest.
    if (full.length <= prefix.length || full.endsWith(REPLACEMENT)) return '';
    const piece = full.slice(prefix.length);
    this.ids = this.ids.slice(this.readOffset);
    this.prefixOffset = 0;
    this.readOffset = this.ids.length;
    return piece;
  }

  flush(): string {
    const prefix = this.decodeIds(this.ids.slice(this.prefixOffset, this.readOffset));
    const full = this.decodeIds(this.ids.slice(this.prefixOffset));
    this.ids = [];
    this.prefixOffset = this.readOffset = 0;
    return full.length > prefix.length ? full.slice(prefix.length) : '';
  }
}

/** Streaming decode for tokenizers whose tokens are byte strings (Tekken). */
export class ByteDecodeStream implements TokenStream {
  private readonly utf8 = new TextDecoder('utf-8');

  constructor(private readonly bytesOf: (id: number) => Uint8Array) {}

  push(id: number): string {
    const b = this.bytesOf(id);
    return b.length === 0 ? '' : this.utf8.decode(b, { stream: true });
  }

  flush(): string {
    return this.utf8.decode();
  }
}
