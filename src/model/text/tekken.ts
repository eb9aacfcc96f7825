/**
 * Voxtral's native tokenizer file, tekken.json, with mistral-common's semantics:
 * tiktoken-style byte BPE over the config's split pattern, the vocabulary cut to
 * `default_vocab_size - default_num_special_tokens` ranks (files list more), token id =
 * rank + number of special tokens, special tokens by rank below that (missing ranks are
 * `<SPECIAL_n>`). Decoding skips special tokens, as mistral-common's IGNORE policy does.
 */
import { ModelLoadError } from '../../errors.js';
import { ByteDecodeStream } from './decode-stream.js';
import { splitPieces, splitRegExp } from './patterns.js';
import type { TextTokenizer, TokenStream } from './types.js';

const EMPTY = new Uint8Array(0);

/** Bytes as a string of char codes 0..255: a cheap exact Map key. */
const key = (b: Uint8Array): string => {
  let s = '';
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return s;
};

function base64Bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export class TekkenTokenizer implements TextTokenizer {
  readonly format = 'tekken' as const;
  readonly vocabSize: number;
  readonly numSpecial: number;
  readonly version: string;
  readonly pattern: string;
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  private readonly tokens: Uint8Array[];
  private readonly ranks = new Map<string, number>();
  private readonly specials: string[];
  private readonly specialIds = new Map<string, number>();
  private readonly re: RegExp;
  private readonly utf8 = new TextEncoder();

  private constructor(tokens: Uint8Array[], specials: string[], pattern: string, vocabSize: number, version: string) {
    this.tokens = tokens;
    this.specials = specials;
    this.numSpecial = specials.length;
    this.vocabSize = vocabSize;
    this.pattern = pattern;
    this.version = version;
    tokens.forEach((t, r) => this.ranks.set(key(t), r));
    specials.forEach((s, r) => this.specialIds.set(s, r));
    this.re = splitRegExp(pattern);
    this.bos = this.specialIds.get('<s>');
    this.eos = this.specialIds.get('</s>');
  }

  /** Parses tekken.json (already JSON-decoded). Throws ModelLoadError naming `file`. */
  static fromJSON(json: unknown, file = 'tekken.json'): TekkenTokenizer {
    const bad = (msg: string): never => {
      throw new ModelLoadError(file, msg);
    };
    if (typeof json !== 'object' || json === null) bad('not a JSON object');
    const j = json as Record<string, unknown>;
    const cfg = j['config'] as Record<string, unknown> | undefined;
    if (typeof cfg !== 'object' || cfg === null) bad('missing "config" (is this a tekken.json?)');
    const int = (k: string): number => {
      const v = cfg![k];
      if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
        bad(`config.${k} must be a positive integer, got ${JSON.stringify(v)}`);
      return v as number;
    };
    const pattern = cfg!['pattern'];
    if (typeof pattern !== 'string' || pattern === '') bad('config.pattern must be a non-empty string');
    const vocabSize = int('default_vocab_size');
    const numSpecial = int('default_num_special_tokens');
    const version = typeof cfg!['version'] === 'string' ? (cfg!['version'] as string) : 'unknown';
    const vocab = j['vocab'];
    if (!Array.isArray(vocab)) bad('"vocab" must be an array');
    const inner = vocabSize - numSpecial;
    if ((vocab as unknown[]).length < inner) {
      bad(
        `"vocab" has ${(vocab as unknown[]).length} entries, fewer than default_vocab_size - default_num_special_tokens = ${inner}`,
      );
    }
    const tokens: Uint8Array[] = [];
    const seen = new Set<string>();
    for (let r = 0; r < inner; r++) {
      const v = (vocab as Record<string, unknown>[])[r];
      if (typeof v !== 'object' || v === null || v['rank'] !== r || typeof v['token_bytes'] !== 'string') {
        bad(`vocab[${r}] must be {rank: ${r}, token_bytes: base64, token_str}`);
      }
      let b: Uint8Array;
      try {
        b = base64Bytes(v['token_bytes'] as string);
      } catch {
        return bad(`vocab[${r}].token_bytes is not base64`);
      }
      if (r < 256 && (b.length !== 1 || b[0] !== r))
        bad(`vocab[${r}] must be the single byte ${r} (the first 256 ranks are the bytes)`);
      const k = key(b);
      if (seen.has(k)) bad(`vocab[${r}] repeats the bytes of an earlier rank`);
      seen.add(k);
      tokens.push(b);
    }
    const specials = TekkenTokenizer.specialTable(j['special_tokens'], numSpecial, bad);
    try {
      splitRegExp(pattern as string);
    } catch (e) {
      bad(`config.pattern is not a pattern this runtime can compile (${e instanceof Error ? e.message : String(e)})`);
    }
    return new TekkenTokenizer(tokens, specials, pattern as string, vocabSize, version);
  }

  /** Special token strings by rank; files before v7 may omit the list (then the v3 defaults apply). */
  private static specialTable(raw: unknown, numSpecial: number, bad: (m: string) => never): string[] {
    const out: string[] = [];
    const defaults = [
      '<unk>',
      '<s>',
      '</s>',
      '[INST]',
      '[/INST]',
      '[AVAILABLE_TOOLS]',
      '[/AVAILABLE_TOOLS]',
      '[TOOL_RESULTS]',
      '[/TOOL_RESULTS]',
      '[TOOL_CALLS]',
      '[IMG]',
      '<pad>',
      '[IMG_BREAK]',
      '[IMG_END]',
      '[PREFIX]',
      '[MIDDLE]',
      '[SUFFIX]',
      '[SYSTEM_PROMPT]',
      '[/SYSTEM_PROMPT]',
      '[TOOL_CONTENT]',
    ];
    const list = raw === undefined || raw === null ? defaults.map((token_str, rank) => ({ rank, token_str })) : raw;
    if (!Array.isArray(list)) bad('"special_tokens" must be an array');
    (list as Record<string, unknown>[]).forEach((s, i) => {
      if (typeof s !== 'object' || s === null || s['rank'] !== i || typeof s['token_str'] !== 'string') {
        bad(`special_tokens[${i}] must be {rank: ${i}, token_str, is_control}`);
      }
      out.push(s['token_str'] as string);
    });
    if (out.length > numSpecial)
      bad(`${out.length} special tokens listed, more than default_num_special_tokens = ${numSpecial}`);
    for (let r = out.length; r < numSpecial; r++) out.push(`<SPECIAL_${r}>`);
    if (new Set(out).size !== out.length) bad('special token strings must be unique');
    return out;
  }

  encode(text: string, opts: { bos?: boolean; eos?: boolean } = {}): number[] {
    const out: number[] = [];
    if (opts.bos) out.push(this.required('<s>'));
    for (const piece of splitPieces(this.re, text)) {
      for (const r of this.bpe(this.utf8.encode(piece))) out.push(r + this.numSpecial);
    }
    if (opts.eos) out.push(this.required('</s>'));
    return out;
  }

  /** tiktoken's merge: the whole piece if it is a rank, else join the lowest-rank adjacent pair until none joins. */
  private bpe(piece: Uint8Array): number[] {
    const whole = this.ranks.get(key(piece));
    if (whole !== undefined) return [whole];
    const parts = Array.from(piece, (b) => String.fromCharCode(b));
    for (;;) {
      let best = -1;
      let at = -1;
      for (let i = 0; i + 1 < parts.length; i++) {
        const r = this.ranks.get(parts[i] + parts[i + 1]);
        if (r !== undefined && (best < 0 || r < best)) {
          best = r;
          at = i;
        }
      }
      if (at < 0) break;
      parts.splice(at, 2, parts[at] + parts[at + 1]);
    }
    return parts.map((p) => this.ranks.get(p)!);
  }

  /** The bytes token `id` stands for; empty for special tokens and ids outside the vocabulary. */
  bytesOf(id: number): Uint8Array {
    const r = id - this.numSpecial;
    return Number.isInteger(r) && r >= 0 && r < this.tokens.length ? this.tokens[r] : EMPTY;
  }

  decode(ids: ArrayLike<number>): string {
    const d = this.decoder();
    let s = '';
    for (let i = 0; i < ids.length; i++) s += d.push(ids[i]);
    return s + d.flush();
  }

  decoder(): TokenStream {
    return new ByteDecodeStream((id) => this.bytesOf(id));
  }

  tokenId(token: string): number | undefined {
    const s = this.specialIds.get(token);
    if (s !== undefined) return s;
    const r = this.ranks.get(key(this.utf8.encode(token)));
    return r === undefined ? undefined : r + this.numSpecial;
  }

  /** The special token's string for ids below the special count, else undefined. */
  specialString(id: number): string | undefined {
    return Number.isInteger(id) && id >= 0 && id < this.numSpecial ? this.specials[id] : undefined;
  }

  isControl(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.numSpecial;
  }

  pieceText(id: number): string {
    return new TextDecoder('utf-8').decode(this.bytesOf(id));
  }

  private required(token: string): number {
    const id = this.specialIds.get(token);
    if (id === undefined) throw new ModelLoadError('tekken.json', `has no ${token} special token`);
    return id;
  }
}
