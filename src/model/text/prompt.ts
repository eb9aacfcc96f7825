/**
 * Each family's transcription prompt around the audio, as the ids before the audio
 * (`prefix`) and after it (`instruction`); the N audio embeddings take the place of the N
 * placeholder tokens the upstream processor would insert.
 *
 *   voxtral        <s>[INST][BEGIN_AUDIO] | [AUDIO]×N | [/INST]lang:en[TRANSCRIBE]
 *                  (mistral-common's transcription request; no "lang:" part without a language)
 *   qwen2_audio    the folder's chat template, user turn = audio + "Detect the language and
 *   qwen2_5_omni   recognize the speech: <|en|>" / system "You are a speech recognition
 *                  model." + "Transcribe the English audio into text without any punctuation
 *                  marks."; the template's <|audio_bos|><|AUDIO|><|audio_eos|> is cut at
 *                  <|AUDIO|>, so prefix ends with <|audio_bos|> and instruction starts with <|audio_eos|>.
 */
import { ModelLoadError } from '../../errors.js';
import { renderChat, splitAtPlaceholder, type ChatMessage } from './chat-template.js';
import { QWEN2_5_OMNI_TEMPLATE, QWEN2_AUDIO_TEMPLATE } from './templates.js';
import type { TextTokenizer } from './types.js';

export type PromptFamily = 'voxtral' | 'qwen2_audio' | 'qwen2_5_omni';

export interface PromptOptions {
  /** Language code of the speech ("en"); omitted: the model detects it. */
  language?: string;
  /** The folder's chat template (chat-template families); omitted: the processor's default. */
  chatTemplate?: string;
  /** Replaces the family's transcription instruction text (chat-template families). */
  instruction?: string;
  /** Replaces the family's system message; null sends none (the template's default applies). */
  system?: string | null;
  /** tokenizer_config.json fields that name the audio tokens (audio_token, audio_bos_token, audio_eos_token). */
  tokenizerConfig?: Record<string, unknown>;
}

export interface AudioPrompt {
  /** Ids before the audio embeddings. */
  prefix: number[];
  /** Ids after the audio embeddings, up to where the answer starts. */
  instruction: number[];
  /** The placeholder id each audio embedding stands for ([AUDIO] / <|AUDIO|>). */
  audioToken: number;
  /** Ids that end the answer, the model's eos first. */
  stopTokens: number[];
  /** Where the chat template came from, for chat-template families. */
  templateSource?: 'folder' | 'built-in';
}

interface MistralRecipe {
  kind: 'mistral-transcription';
  stop: string[];
}

interface ChatRecipe {
  kind: 'chat-template';
  defaultTemplate: string;
  system: string | null;
  instruction: (language: string | undefined) => string;
  stop: string[];
}

/** English names for the instruction that names the language (Qwen2.5-Omni). */
const LANGUAGE_NAMES: Record<string, string> = {
  en: 'English', zh: 'Chinese', de: 'German', fr: 'French', es: 'Spanish', it: 'Italian', ja: 'Japanese',
  ko: 'Korean', ru: 'Russian', pt: 'Portuguese', nl: 'Dutch', ar: 'Arabic', hi: 'Hindi',
};

export const PROMPT_RECIPES: Record<PromptFamily, MistralRecipe | ChatRecipe> = {
  voxtral: { kind: 'mistral-transcription', stop: ['</s>'] },
  qwen2_audio: {
    kind: 'chat-template',
    defaultTemplate: QWEN2_AUDIO_TEMPLATE,
    system: null,
    instruction: (lang) => (lang ? `Detect the language and recognize the speech: <|${lang}|>` : 'Detect the language and recognize the speech:'),
    stop: ['<|im_end|>', '<|endoftext|>'],
  },
  qwen2_5_omni: {
    kind: 'chat-template',
    defaultTemplate: QWEN2_5_OMNI_TEMPLATE,
    system: 'You are a speech recognition model.',
    instruction: (lang) =>
      lang ? `Transcribe the ${LANGUAGE_NAMES[lang] ?? lang} audio into text without any punctuation marks.` : 'Transcribe the audio into text without any punctuation marks.',
    stop: ['<|im_end|>', '<|endoftext|>'],
  },
};

/** The transcription prompt of `family` for tokenizer `tok`. Throws ModelLoadError when a token it needs is missing. */
export function buildPrompt(family: PromptFamily, tok: TextTokenizer, opts: PromptOptions = {}): AudioPrompt {
  const recipe = PROMPT_RECIPES[family];
  if (!recipe) throw new ModelLoadError('config.json', `no transcription prompt for model family ${JSON.stringify(family)}`);
  const stopTokens = recipe.stop.map((s) => tok.tokenId(s)).filter((id): id is number => id !== undefined);
  if (stopTokens.length === 0) throw new ModelLoadError(tokenizerFile(tok), `defines none of the stop tokens ${recipe.stop.join(', ')}`);
  return recipe.kind === 'mistral-transcription' ? { ...mistralPrompt(tok, opts), stopTokens } : { ...chatPrompt(recipe, tok, opts), stopTokens };
}

/** The whole prompt with the placeholder repeated for `n` audio tokens (what the upstream processor feeds the model). */
export function promptIds(p: AudioPrompt, n: number): number[] {
  return [...p.prefix, ...new Array<number>(n).fill(p.audioToken), ...p.instruction];
}

function mistralPrompt(tok: TextTokenizer, opts: PromptOptions): Omit<AudioPrompt, 'stopTokens'> {
  const id = (s: string) => special(tok, s);
  const lang = opts.language ? tok.encode(`lang:${opts.language}`) : [];
  return {
    prefix: [id('<s>'), id('[INST]'), id('[BEGIN_AUDIO]')],
    instruction: [id('[/INST]'), ...lang, id('[TRANSCRIBE]')],
    audioToken: id('[AUDIO]'),
  };
}

function chatPrompt(recipe: ChatRecipe, tok: TextTokenizer, opts: PromptOptions): Omit<AudioPrompt, 'stopTokens'> {
  const cfg = opts.tokenizerConfig ?? (tok as { config?: Record<string, unknown> }).config ?? {};
  const name = (field: string, fallback: string) => (typeof cfg[field] === 'string' ? (cfg[field] as string) : fallback);
  const audio = name('audio_token', '<|AUDIO|>');
  const bos = name('audio_bos_token', '<|audio_bos|>');
  const eos = name('audio_eos_token', '<|audio_eos|>');
  const system = opts.system === undefined ? recipe.system : opts.system;
  const messages: ChatMessage[] = [];
  if (system !== null) messages.push({ role: 'system', content: system });
  messages.push({
    role: 'user',
    content: [
      { type: 'audio', audio_url: 'audio' },
      { type: 'text', text: opts.instruction ?? recipe.instruction(opts.language) },
    ],
  });
  const template = opts.chatTemplate ?? recipe.defaultTemplate;
  const { before, after } = splitAtPlaceholder(renderChat(template, messages), audio);
  const prefix = tok.encode(before);
  const instruction = tok.encode(after);
  const bosId = special(tok, bos);
  const eosId = special(tok, eos);
  if (prefix[prefix.length - 1] !== bosId || instruction[0] !== eosId) {
    throw new ModelLoadError('chat_template', `the audio placeholder ${audio} must sit between ${bos} and ${eos} in the rendered prompt`);
  }
  return { prefix, instruction, audioToken: special(tok, audio), templateSource: opts.chatTemplate ? 'folder' : 'built-in' };
}

function special(tok: TextTokenizer, s: string): number {
  const id = tok.tokenId(s);
  if (id === undefined) throw new ModelLoadError(tokenizerFile(tok), `has no ${s} token, which the transcription prompt needs`);
  return id;
}

const tokenizerFile = (tok: TextTokenizer) => (tok.format === 'tekken' ? 'tekken.json' : 'tokenizer.json');
