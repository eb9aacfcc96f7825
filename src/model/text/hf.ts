/**
 * A Hugging Face tokenizer.json (with its tokenizer_config.json) through
 * @huggingface/tokenizers: Qwen's byte-level BPE, or a Voxtral tokenizer converted from
 * tekken.json. Some converted Mistral files carry the wrong split pattern; like
 * transformers' `fix_mistral_regex`, the pattern is checked and, unless told otherwise,
 * replaced by the Tekken one, with a warning either way.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelLoadError } from '../../errors.js';
import { WindowDecodeStream } from './decode-stream.js';
import { MISTRAL_PATTERN } from './patterns.js';
import type { TextTokenizer, TokenStream } from './types.js';

type Json = Record<string, unknown>;

export interface HfTokenizerOptions {
  /** Treat as a Mistral tokenizer (default: detected from its [INST]/[/INST] special tokens). */
  mistral?: boolean;
  /** Replace a wrong Mistral split pattern (default true); false keeps it and only warns. */
  fixMistralRegex?: boolean;
  /** Called with each warning (default: none; they are also kept in `warnings`). */
  onWarning?: (message: string) => void;
}

export class HfTokenizer implements TextTokenizer {
  readonly format = 'hf' as const;
  readonly vocabSize: number;
  readonly bos: number | undefined;
  readonly eos: number | undefined;
  /** What loading found questionable (e.g. a corrected split pattern). */
  readonly warnings: string[] = [];
  /** The tokenizer_config.json it was built with (chat_template, audio_token, ...). */
  readonly config: Json;
  private readonly tok: Tokenizer;
  private readonly special = new Set<number>();
  private readonly cleanUp: boolean;

  private constructor(tok: Tokenizer, json: Json, config: Json, warnings: string[]) {
    this.tok = tok;
    this.config = config;
    this.warnings.push(...warnings);
    let max = -1;
    const vocab = (json['model'] as Json)['vocab'];
    if (vocab && typeof vocab === 'object' && !Array.isArray(vocab)) {
      for (const v of Object.values(vocab as Json)) if (typeof v === 'number' && v > max) max = v;
    } else if (Array.isArray(vocab)) {
      max = vocab.length - 1;
    }
    for (const t of json['added_tokens'] as Json[]) {
      const id = t['id'] as number;
      if (id > max) max = id;
      if (t['special'] === true) this.special.add(id);
    }
    this.vocabSize = max + 1;
    this.bos = this.configToken('bos_token');
    this.eos = this.configToken('eos_token');
    this.cleanUp = config['clean_up_tokenization_spaces'] === true;
  }

  /**
   * Builds the tokenizer from tokenizer.json and tokenizer_config.json (both JSON-decoded;
   * the config may be `{}` when the folder has none). Throws ModelLoadError naming `file`.
   */
  static fromJSON(
    json: unknown,
    config: unknown = {},
    file = 'tokenizer.json',
    opts: HfTokenizerOptions = {},
  ): HfTokenizer {
    if (typeof json !== 'object' || json === null) throw new ModelLoadError(file, 'not a JSON object');
    const j = json as Json;
    const model = j['model'] as Json | undefined;
    if (typeof model !== 'object' || model === null || typeof model['type'] !== 'string') {
      throw new ModelLoadError(file, 'missing "model" (is this a Hugging Face tokenizer.json?)');
    }
    if (!Array.isArray(j['added_tokens'])) throw new ModelLoadError(file, '"added_tokens" must be an array');
    const cfg = typeof config === 'object' && config !== null ? (config as Json) : {};
    const warnings: string[] = [];
    const fixed = HfTokenizer.checkMistralPattern(j, file, opts, warnings);
    for (const w of warnings) opts.onWarning?.(w);
    let tok: Tokenizer;
    try {
      tok = new Tokenizer(fixed, cfg);
    } catch (e) {
      throw new ModelLoadError(file, `cannot build the tokenizer (${e instanceof Error ? e.message : String(e)})`);
    }
    return new HfTokenizer(tok, fixed, cfg, warnings);
  }

  /** The tokenizer.json to use: `j` itself, or a copy with the Tekken split pattern. */
  private static checkMistralPattern(j: Json, file: string, opts: HfTokenizerOptions, warnings: string[]): Json {
    const added = (j['added_tokens'] as Json[]).map((t) => t['content']);
    const mistral = opts.mistral ?? (added.includes('[INST]') && added.includes('[/INST]'));
    if (!mistral) return j;
    const pre = j['pre_tokenizer'] as Json | null | undefined;
    const seq = pre && pre['type'] === 'Sequence' ? (pre['pretokenizers'] as Json[]) : null;
    const split = seq ? seq[0] : pre;
    const current =
      split && split['type'] === 'Split'
        ? ((split['pattern'] as Json | undefined)?.['Regex'] as string | undefined)
        : undefined;
    if (current === MISTRAL_PATTERN) return j;
    const fix = opts.fixMistralRegex ?? true;
    warnings.push(
      `${file}: the split pattern ${current === undefined ? 'is missing' : 'differs from the Tekken pattern'}; ` +
        (fix
          ? 'using the Tekken pattern instead (as transformers does with fix_mistral_regex=True)'
          : 'kept as is, so tokenization will differ from tekken.json'),
    );
    if (!fix) return j;
    const good = { type: 'Split', pattern: { Regex: MISTRAL_PATTERN }, behavior: 'Isolated', invert: false };
    const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
    let next: Json;
    if (seq) next = { ...pre, pretokenizers: [good, ...seq.slice(1)] };
    else if (!pre || pre['type'] === 'Split') next = { type: 'Sequence', pretokenizers: [good, byteLevel] };
    // Metaspace does not combine with a preceding Split (it loses spaces): byte-level does.
    else next = { type: 'Sequence', pretokenizers: [good, pre['type'] === 'Metaspace' ? byteLevel : pre] };
    return { ...j, pre_tokenizer: next };
  }

  private configToken(field: string): number | undefined {
    const v = this.config[field];
    const s = typeof v === 'string' ? v : typeof v === 'object' && v !== null ? (v as Json)['content'] : undefined;
    return typeof s === 'string' ? this.tok.token_to_id(s) : undefined;
  }

  encode(text: string, opts: { bos?: boolean; eos?: boolean } = {}): number[] {
    const ids = text.length > 0 ? this.tok.encode(text, { add_special_tokens: false }).ids : [];
    const need = (id: number | undefined, what: string): number => {
      if (id === undefined) throw new ModelLoadError('tokenizer_config.json', `defines no ${what} token`);
      return id;
    };
    if (opts.bos) ids.unshift(need(this.bos, 'bos'));
    if (opts.eos) ids.push(need(this.eos, 'eos'));
    return ids;
  }

  decode(ids: ArrayLike<number>): string {
    // Ids the tokenizer does not define (padded embedding rows) decode to nothing.
    const known = Array.from(ids).filter((id) => this.tok.id_to_token(id) !== undefined);
    if (known.length === 0) return '';
    return this.tok.decode(known, { skip_special_tokens: true, clean_up_tokenization_spaces: this.cleanUp });
  }

  decoder(): TokenStream {
    return new WindowDecodeStream((ids) => this.decode(ids));
  }

  tokenId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  isControl(id: number): boolean {
    return this.special.has(id);
  }

  pieceText(id: number): string {
    return this.decode([id]);
  }
}
