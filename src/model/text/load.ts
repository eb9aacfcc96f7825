/**
 * Picks and loads a model folder's tokenizer: tekken.json (Voxtral's native file) when
 * present, else tokenizer.json, which is either the reference model's SentencePiece export
 * or a Hugging Face tokenizer (then with tokenizer_config.json). Also finds the folder's
 * chat template (chat_template.jinja, chat_template.json, or tokenizer_config.json).
 */
import { ModelLoadError } from '../../errors.js';
import { exists, joinModelPath, readBytes, readJson } from '../files.js';
import { Tokenizer as SentencePieceTokenizer } from '../tokenizer.js';
import { HfTokenizer, type HfTokenizerOptions } from './hf.js';
import { TekkenTokenizer } from './tekken.js';
import type { TextTokenizer } from './types.js';

export interface TokenizerFiles {
  /** tekken.json, JSON-decoded. */
  tekken?: unknown;
  /** tokenizer.json, JSON-decoded. */
  tokenizer?: unknown;
  /** tokenizer_config.json, JSON-decoded. */
  tokenizerConfig?: unknown;
}

export interface LoadTokenizerOptions extends HfTokenizerOptions {
  /** Which file wins when a folder has both (default 'tekken', mistral-common's choice). */
  prefer?: 'tekken' | 'tokenizer.json';
}

/** The tokenizer the given (already parsed) files describe. `base` only names files in errors. */
export function tokenizerFromFiles(files: TokenizerFiles, opts: LoadTokenizerOptions = {}, base = ''): TextTokenizer {
  const path = (n: string) => (base ? joinModelPath(base, n) : n);
  const useTekken = files.tekken !== undefined && (opts.prefer !== 'tokenizer.json' || files.tokenizer === undefined);
  if (useTekken) return TekkenTokenizer.fromJSON(files.tekken, path('tekken.json'));
  const j = files.tokenizer;
  if (j === undefined)
    throw new ModelLoadError(path('tokenizer.json'), 'missing: the folder needs tokenizer.json or tekken.json');
  if (typeof j === 'object' && j !== null && ('pieces' in j || (j as { type?: unknown }).type === 'sentencepiece')) {
    return SentencePieceTokenizer.fromJSON(j, path('tokenizer.json'));
  }
  return HfTokenizer.fromJSON(j, files.tokenizerConfig ?? {}, path('tokenizer.json'), opts);
}

/** Loads the tokenizer of the model folder `base` (URL or path). */
export async function loadTextTokenizer(base: string, opts: LoadTokenizerOptions = {}): Promise<TextTokenizer> {
  const path = (n: string) => joinModelPath(base, n);
  const files: TokenizerFiles = {};
  const optional = async (name: string) => ((await exists(path(name))) ? readJson(path(name)) : undefined);
  const hasTekken = await exists(path('tekken.json'));
  if (hasTekken && opts.prefer !== 'tokenizer.json') {
    files.tekken = await readJson(path('tekken.json'));
  } else {
    files.tokenizer = await optional('tokenizer.json');
    if (files.tokenizer === undefined && hasTekken) files.tekken = await readJson(path('tekken.json'));
    files.tokenizerConfig = await optional('tokenizer_config.json');
  }
  return tokenizerFromFiles(files, opts, base);
}

/**
 * The chat template in parsed files: chat_template.jinja's text, chat_template.json's
 * `chat_template`, or tokenizer_config.json's `chat_template` (a string, or a list of
 * named templates of which "default" is used).
 */
export function chatTemplateFrom(files: {
  jinja?: string;
  chatTemplateJson?: unknown;
  tokenizerConfig?: unknown;
}): string | undefined {
  if (files.jinja !== undefined) return files.jinja;
  for (const j of [files.chatTemplateJson, files.tokenizerConfig]) {
    const t = typeof j === 'object' && j !== null ? (j as { chat_template?: unknown }).chat_template : undefined;
    if (typeof t === 'string') return t;
    if (Array.isArray(t)) {
      const named = t.find((x) => x && x.name === 'default') ?? t[0];
      if (named && typeof named.template === 'string') return named.template;
    }
  }
  return undefined;
}

/** The chat template of the model folder `base`, or undefined when it ships none. */
export async function readChatTemplate(base: string): Promise<string | undefined> {
  return (await findChatTemplate(base))?.template;
}

/** The chat template of the model folder `base` and the file it came from, so a template that fails to render names it. */
export async function findChatTemplate(base: string): Promise<{ template: string; file: string } | undefined> {
  const path = (n: string) => joinModelPath(base, n);
  if (await exists(path('chat_template.jinja'))) {
    return {
      template: new TextDecoder().decode(await readBytes(path('chat_template.jinja'))),
      file: path('chat_template.jinja'),
    };
  }
  for (const name of ['chat_template.json', 'tokenizer_config.json']) {
    const json = (await exists(path(name))) ? await readJson(path(name)) : undefined;
    const template = chatTemplateFrom({ chatTemplateJson: json });
    if (template !== undefined) return { template, file: path(name) };
  }
  return undefined;
}
