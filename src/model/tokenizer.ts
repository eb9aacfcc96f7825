/**
 * The SentencePiece vocabulary exported as tokenizer.json:
 * `{"type":"sentencepiece","model":..., "pieces":[...], "bos","eos","pad","unk"}`,
 * pieces indexed by id ("▁" marks a word start; `<0xNN>` byte pieces, if the model has
 * byte fallback, carry raw UTF-8 bytes). `encode` is SentencePiece's own for a BPE model
 * (the reference model's) and a greedy longest match for any other.
 */
import { ModelLoadError } from '../errors.js';
import { readJson } from './files.js';
import type { TextTokenizer } from './text/types.js';

const WORD = '\u2581';
const BYTE_PIECE = /^<0x([0-9A-Fa-f]{2})>$/;
/** Control pieces such as <s>, </s>, <pad>, <|transcribe|>: never rendered as text. */
const CONTROL_PIECE = /^<[^<>\s]+>$/;

type Kind = 0 | 1 | 2; // text, byte, control

export class Tokenizer implements TextTokenizer {
  readonly format = 'sentencepiece' as const;
  readonly pieces: readonly string[];
  readonly bos: number;
  readonly eos: number;
  readonly pad: number;
  readonly unk: number;
  readonly model: string;
  private readonly kind: Uint8Array;
  private readonly byteValue: Int16Array;
  /** Text pieces by string, for encode. */
  private readonly index = new Map<string, number>();
  private readonly byteId = new Int32Array(256).fill(-1);
  private readonly maxLen: number;

  constructor(pieces: string[], special: { bos: number; eos: number; pad: number; unk: number }, model = 'unigram') {
    this.pieces = pieces;
    this.bos = special.bos;
    this.eos = special.eos;
    this.pad = special.pad;
    this.unk = special.unk;
    this.model = model;
    this.kind = new Uint8Array(pieces.length);
    this.byteValue = new Int16Array(pieces.length).fill(-1);
    let maxLen = 1;
    const specials = new Set([special.bos, special.eos, special.pad, special.unk]);
    pieces.forEach((p, id) => {
      const b = BYTE_PIECE.exec(p);
      if (b) {
        this.kind[id] = 1;
        this.byteValue[id] = parseInt(b[1], 16);
        if (this.byteId[this.byteValue[id]] < 0) this.byteId[this.byteValue[id]] = id;
      } else if (specials.has(id) || CONTROL_PIECE.test(p)) {
        this.kind[id] = 2;
      } else {
        if (!this.index.has(p)) this.index.set(p, id);
        maxLen = Math.max(maxLen, p.length);
      }
    });
    this.maxLen = maxLen;
  }

  /** Parses tokenizer.json (already JSON-decoded). Throws ModelLoadError naming `file`. */
  static fromJSON(json: unknown, file = 'tokenizer.json'): Tokenizer {
    if (typeof json !== 'object' || json === null) throw new ModelLoadError(file, 'not a JSON object');
    const j = json as Record<string, unknown>;
    if (j['type'] !== undefined && j['type'] !== 'sentencepiece') {
      throw new ModelLoadError(
        file,
        `unsupported tokenizer type ${JSON.stringify(j['type'])} (expected "sentencepiece")`,
      );
    }
    const raw = j['pieces'];
    if (!Array.isArray(raw) || raw.length === 0)
      throw new ModelLoadError(file, 'field "pieces" must be a non-empty array');
    // Pieces may be plain strings, [piece, score] pairs or {piece, score} objects.
    const pieces = raw.map((p, i) => {
      const s =
        typeof p === 'string'
          ? p
          : Array.isArray(p)
            ? p[0]
            : typeof p === 'object' && p !== null
              ? (p as { piece?: unknown }).piece
              : undefined;
      if (typeof s !== 'string') throw new ModelLoadError(file, `piece ${i} is not a string`);
      return s;
    });
    const id = (k: string, fallback?: number): number => {
      const v = j[k] ?? fallback;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= pieces.length) {
        throw new ModelLoadError(
          file,
          `field "${k}" must be a token id in [0, ${pieces.length}), ${v === undefined ? 'but it is missing or null' : `got ${JSON.stringify(v)}`}`,
        );
      }
      return v;
    };
    const model = typeof j['model'] === 'string' ? (j['model'] as string) : 'unigram';
    return new Tokenizer(
      pieces,
      {
        bos: id('bos'),
        eos: id('eos'),
        pad: id('pad'),
        unk: id('unk', pieces.indexOf('<unk>') >= 0 ? pieces.indexOf('<unk>') : undefined),
      },
      model,
    );
  }

  /** Loads tokenizer.json from a URL (fetch) or, in Node, a file path. */
  static async load(source: string): Promise<Tokenizer> {
    return Tokenizer.fromJSON(await readJson(source), source);
  }

  get vocabSize(): number {
    return this.pieces.length;
  }

  /** True for bos/eos/pad/unk and other control pieces (skipped when decoding). */
  isControl(id: number): boolean {
    return this.kind[id] === 2;
  }

  /** Id of a piece given its string (control pieces such as "<s>" included). */
  tokenId(token: string): number | undefined {
    const id = this.index.get(token);
    if (id !== undefined) return id;
    const i = this.pieces.indexOf(token);
    return i >= 0 ? i : undefined;
  }

  /** A piece's text on its own, "▁" as a leading space; "" for control and byte pieces. */
  pieceText(id: number): string {
    return this.render(id).text;
  }

  /** Text of `ids`, control tokens skipped, "▁" as spaces, the first word's leading space dropped. */
  decode(ids: ArrayLike<number>): string {
    const d = this.decoder();
    let s = '';
    for (let i = 0; i < ids.length; i++) s += d.push(ids[i]);
    return s + d.flush();
  }

  /**
   * Incremental decoder for streaming: `push(id)` returns the text this token adds;
   * the concatenation of every push and the final `flush()` equals `decode(ids)`.
   * Incomplete UTF-8 from byte pieces is held back until its sequence completes.
   */
  decoder(): StreamingDecoder {
    return new StreamingDecoder(this);
  }

  /** @internal */
  render(id: number): { kind: Kind; text: string; byte: number } {
    if (!Number.isInteger(id) || id < 0 || id >= this.pieces.length) return { kind: 2, text: '', byte: -1 };
    const kind = this.kind[id] as Kind;
    return { kind, text: kind === 0 ? this.pieces[id].replaceAll(WORD, ' ') : '', byte: this.byteValue[id] };
  }

  /**
   * Encoding with SentencePiece's dummy prefix ("hello world" -> "▁hello▁world"). A 'bpe'
   * model encodes as SentencePiece's BPE does: from single characters, merge again and again
   * the adjacent pair whose join is the best-scored piece, leftmost first; a BPE model's pieces
   * are stored in merge order (score −id), so the best is the lowest id. Any other model is
   * encoded by greedy longest match (not SentencePiece's Viterbi, which needs the scores).
   * Characters no piece covers fall back to byte pieces, else unk.
   */
  encode(text: string, opts: { bos?: boolean; eos?: boolean } = {}): number[] {
    const norm = WORD + text.trim().split(/\s+/).filter(Boolean).join(WORD);
    const symbols = this.model === 'bpe' ? this.merge(Array.from(norm)) : this.longestMatch(norm);
    const out: number[] = [];
    if (opts.bos) out.push(this.bos);
    const utf8 = new TextEncoder();
    for (const sym of symbols) {
      const id = this.index.get(sym);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      for (const ch of sym) {
        const bytes = utf8.encode(ch);
        if (bytes.every((b) => this.byteId[b] >= 0)) bytes.forEach((b) => out.push(this.byteId[b]));
        else out.push(this.unk);
      }
    }
    if (opts.eos) out.push(this.eos);
    return out;
  }

  private merge(symbols: string[]): string[] {
    for (;;) {
      let at = -1;
      let best = Infinity;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const id = this.index.get(symbols[i] + symbols[i + 1]);
        if (id !== undefined && id < best) {
          best = id;
          at = i;
        }
      }
      if (at < 0) return symbols;
      symbols.splice(at, 2, symbols[at] + symbols[at + 1]);
    }
  }

  /** The longest piece at each place; a character no piece starts with stands alone. */
  private longestMatch(norm: string): string[] {
    const out: string[] = [];
    let i = 0;
    while (i < norm.length) {
      let len = Math.min(this.maxLen, norm.length - i);
      for (; len > 0; len--) if (this.index.has(norm.slice(i, i + len))) break;
      if (len === 0) len = String.fromCodePoint(norm.codePointAt(i) ?? 0).length;
      out.push(norm.slice(i, i + len));
      i += len;
    }
    return out;
  }
}

export class StreamingDecoder {
  private readonly tok: Tokenizer;
  private started = false;
  private readonly utf8 = new TextDecoder('utf-8');
  private readonly pending: number[] = [];

  constructor(tok: Tokenizer) {
    this.tok = tok;
  }

  push(id: number): string {
    const r = this.tok.render(id);
    if (r.kind === 1) {
      this.pending.push(r.byte);
      return this.emit(this.drainBytes(false));
    }
    if (r.kind === 2) return '';
    return this.emit(this.drainBytes(true) + r.text);
  }

  /** Text still held back (an incomplete UTF-8 sequence becomes U+FFFD). */
  flush(): string {
    return this.emit(this.drainBytes(true));
  }

  private drainBytes(final: boolean): string {
    if (this.pending.length === 0 && !final) return '';
    const bytes = Uint8Array.from(this.pending);
    this.pending.length = 0;
    return this.utf8.decode(bytes, { stream: !final });
  }

  private emit(s: string): string {
    if (!this.started) {
      if (s.startsWith(' ')) s = s.slice(1);
      if (s.length > 0) this.started = true;
    }
    return s;
  }
}
