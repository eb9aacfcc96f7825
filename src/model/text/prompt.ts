/**
 * A family's transcription prompt around the audio, from its recipe (the family record's
 * `prompt`), as the ids before the audio (`prefix`) and after it (`instruction`); the N
 * audio embeddings take the place of the N placeholder tokens the upstream processor
 * would insert. Two kinds of recipe:
 *
 *   mistral-transcription  <s>[INST][BEGIN_AUDIO] | [AUDIO]×N | [/INST]lang:en[TRANSCRIBE]
 *                          (mistral-common's transcription request; no "lang:" part without a language);
 *                          a translation is its chat request, audio chunk then text chunk:
 *                          <s>[INST][BEGIN_AUDIO] | [AUDIO]×N | {instruction}[/INST]
 *   chat-template          the folder's chat template (or the recipe's default) rendered with
 *                          the recipe's system message and a user turn of audio + instruction;
 *                          the template's audio bos / placeholder / eos triple is cut at the
 *                          placeholder, so prefix ends with the audio bos and instruction starts
 *                          with the audio eos.
 *
 * "No language" is a case of its own in both: the recipe's prompt without a language, in
 * which the model detects it (PromptOptions.language omitted or "none", see language.ts).
 * Task "translate" takes the recipe's translation (system turn and) instruction into
 * `targetLanguage`; a recipe without one refuses it.
 */
import { ModelLoadError, WnwError } from '../../errors.js';
import { languageCode } from './language.js';
import { renderChat, splitAtPlaceholder, type ChatMessage } from './chat-template.js';
import type { TextTokenizer } from './types.js';

export interface PromptOptions {
  /** Language code of the speech ("en"); omitted or "none": the prompt without a language (the model detects it). */
  language?: string;
  /** What the answer is: the speech as said (default) or translated into `targetLanguage`. */
  task?: PromptTask;
  /** The language code a translation is into (task "translate" only). */
  targetLanguage?: string;
  /** The folder's chat template (chat-template families); omitted: the processor's default. */
  chatTemplate?: string;
  /** The file `chatTemplate` came from, named by a template that fails to render. */
  chatTemplateFile?: string;
  /** Replaces the family's transcription instruction text (chat-template families). */
  instruction?: string;
  /** Replaces the family's system message; null sends none (the template's default applies). */
  system?: string | null;
  /**
   * A question about the audio instead of the task's instruction: the recipe's chat request,
   * a user turn of the audio then the question (Voxtral: `[AUDIO]×N{question}[/INST]`).
   */
  question?: string;
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

export type PromptTask = 'transcribe' | 'translate';

export const PROMPT_TASKS: readonly PromptTask[] = ['transcribe', 'translate'];

export interface MistralRecipe {
  kind: 'mistral-transcription';
  /** Token strings that end the answer. */
  stop: string[];
  /**
   * The translation request's text into `target` from `source` (undefined: none given): the
   * transcription request has no translation form, so the model is asked in words in a
   * chat request (mistral-common's instruct encoding; system messages are refused with audio).
   */
  translation?: { instruction: (target: string, source: string | undefined) => string };
}

export interface ChatRecipe {
  kind: 'chat-template';
  /** The processor's template, used when the folder ships none. */
  defaultTemplate: string;
  system: string | null;
  /** The transcription instruction, for a language code and for no language. */
  instruction: { withLanguage: (code: string) => string; withoutLanguage: string };
  /** The speech translation prompt: its system message and its instruction into `target` from `source` (undefined: none given). */
  translation?: { system: string | null; instruction: (target: string, source: string | undefined) => string };
  stop: string[];
  /** Token strings of the audio span; tokenizer_config.json's audio_token, audio_bos_token and audio_eos_token override them. */
  audioTokens: { audio: string; bos: string; eos: string };
}

export type PromptRecipe = MistralRecipe | ChatRecipe;

/** The transcription prompt of `recipe` for tokenizer `tok`. Throws ModelLoadError when a token it needs is missing. */
export function buildPrompt(recipe: PromptRecipe, tok: TextTokenizer, opts: PromptOptions = {}): AudioPrompt {
  const stopTokens = recipe.stop.map((s) => tok.tokenId(s)).filter((id): id is number => id !== undefined);
  if (stopTokens.length === 0)
    throw new ModelLoadError(tokenizerFile(tok), `defines none of the stop tokens ${recipe.stop.join(', ')}`);
  opts = { ...opts, language: languageCode(opts.language), targetLanguage: targetOf(recipe, opts) };
  return recipe.kind === 'mistral-transcription'
    ? { ...mistralPrompt(recipe, tok, opts), stopTokens }
    : { ...chatPrompt(recipe, tok, opts), stopTokens };
}

/** The whole prompt with the placeholder repeated for `n` audio tokens (what the upstream processor feeds the model). */
export function promptIds(p: AudioPrompt, n: number): number[] {
  return [...p.prefix, ...new Array<number>(n).fill(p.audioToken), ...p.instruction];
}

function mistralPrompt(
  recipe: MistralRecipe,
  tok: TextTokenizer,
  opts: PromptOptions,
): Omit<AudioPrompt, 'stopTokens'> {
  const id = (s: string) => special(tok, s);
  const lang = opts.language !== undefined ? tok.encode(`lang:${opts.language}`) : [];
  const translation = opts.targetLanguage !== undefined ? recipe.translation : undefined;
  const chat =
    opts.question ?? (translation ? translation.instruction(opts.targetLanguage!, opts.language) : undefined);
  return {
    prefix: [id('<s>'), id('[INST]'), id('[BEGIN_AUDIO]')],
    instruction:
      chat !== undefined ? [...tok.encode(chat), id('[/INST]')] : [id('[/INST]'), ...lang, id('[TRANSCRIBE]')],
    audioToken: id('[AUDIO]'),
  };
}

function chatPrompt(recipe: ChatRecipe, tok: TextTokenizer, opts: PromptOptions): Omit<AudioPrompt, 'stopTokens'> {
  const cfg = opts.tokenizerConfig ?? (tok as { config?: Record<string, unknown> }).config ?? {};
  const name = (field: string, fallback: string) =>
    typeof cfg[field] === 'string' ? (cfg[field] as string) : fallback;
  const audio = name('audio_token', recipe.audioTokens.audio);
  const bos = name('audio_bos_token', recipe.audioTokens.bos);
  const eos = name('audio_eos_token', recipe.audioTokens.eos);
  const translation = opts.targetLanguage !== undefined ? recipe.translation : undefined;
  const system = opts.system !== undefined ? opts.system : translation ? translation.system : recipe.system;
  const messages: ChatMessage[] = [];
  if (system !== null) messages.push({ role: 'system', content: system });
  messages.push({
    role: 'user',
    content: [
      { type: 'audio', audio_url: 'audio' },
      {
        type: 'text',
        text:
          opts.question ??
          opts.instruction ??
          (translation
            ? translation.instruction(opts.targetLanguage!, opts.language)
            : instructionText(recipe, opts.language)),
      },
    ],
  });
  const template = opts.chatTemplate ?? recipe.defaultTemplate;
  const file = opts.chatTemplate !== undefined ? (opts.chatTemplateFile ?? 'chat_template') : 'chat_template';
  const { before, after } = splitAtPlaceholder(renderChat(template, messages, {}, file), audio, file);
  const prefix = tok.encode(before);
  const instruction = tok.encode(after);
  const bosId = special(tok, bos);
  const eosId = special(tok, eos);
  if (prefix[prefix.length - 1] !== bosId || instruction[0] !== eosId) {
    throw new ModelLoadError(
      file,
      `the audio placeholder ${audio} must sit between ${bos} and ${eos} in the rendered prompt`,
    );
  }
  return {
    prefix,
    instruction,
    audioToken: special(tok, audio),
    templateSource: opts.chatTemplate ? 'folder' : 'built-in',
  };
}

/** The system message every request of a recording shares by default: the recipe's transcription one. */
export function conversationSystem(recipe: PromptRecipe): string | null {
  return recipe.kind === 'chat-template' ? recipe.system : null;
}

/**
 * The ids that follow an answer to ask `question` next in the same conversation, starting
 * with the end of the answer's turn (the stop token the model sampled is never written to
 * the KV, so the next turn writes it). Voxtral (mistral-common's instruct encoding):
 * `</s>[INST]{question}[/INST]`. A chat template: what it renders after an assistant turn
 * for the next user turn and the assistant's header, ChatML's
 * `<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n`.
 * `opts` are the conversation's (its system message and the folder's template).
 */
export function followUpIds(
  recipe: PromptRecipe,
  tok: TextTokenizer,
  question: string,
  opts: Pick<PromptOptions, 'chatTemplate' | 'chatTemplateFile' | 'system'> = {},
): number[] {
  if (recipe.kind === 'mistral-transcription') {
    const id = (s: string) => special(tok, s);
    return [id(recipe.stop[0]), id('[INST]'), ...tok.encode(question), id('[/INST]')];
  }
  const system = opts.system !== undefined ? opts.system : recipe.system;
  const answer = '\u0000answer\u0000';
  const messages: ChatMessage[] = [];
  if (system !== null) messages.push({ role: 'system', content: system });
  messages.push(
    { role: 'user', content: [{ type: 'text', text: 'question' }] },
    { role: 'assistant', content: answer },
    { role: 'user', content: [{ type: 'text', text: question }] },
  );
  const file = opts.chatTemplate !== undefined ? (opts.chatTemplateFile ?? 'chat_template') : 'chat_template';
  const rendered = renderChat(opts.chatTemplate ?? recipe.defaultTemplate, messages, {}, file);
  const ids = tok.encode(splitAtPlaceholder(rendered, answer, file).after);
  const stops = recipe.stop.map((s) => tok.tokenId(s));
  if (!stops.includes(ids[0]))
    throw new ModelLoadError(file, `an assistant turn must end with one of ${recipe.stop.join(', ')}`);
  return ids;
}

/**
 * The language code a task translates into (undefined for a transcription); a task and
 * target that do not go together are a BAD_ARGUMENT.
 */
export function taskTarget(task: unknown, targetLanguage: unknown): string | undefined {
  const t = task ?? 'transcribe';
  if (!PROMPT_TASKS.includes(t as PromptTask))
    throw new WnwError(
      'BAD_ARGUMENT',
      `option task must be one of ${PROMPT_TASKS.map((x) => `"${x}"`).join(', ')}, got ${JSON.stringify(t)}`,
    );
  const target = languageCode(targetLanguage, 'targetLanguage');
  if (t === 'transcribe') {
    if (targetLanguage !== undefined)
      throw new WnwError(
        'BAD_ARGUMENT',
        'option targetLanguage is for task "translate"; a transcription keeps the language of the speech',
      );
    return undefined;
  }
  if (target === undefined)
    throw new WnwError('BAD_ARGUMENT', 'task "translate" needs targetLanguage, a language code such as "en"');
  return target;
}

/** The target of a translation (undefined for a transcription); a task the recipe cannot do is a BAD_ARGUMENT. */
function targetOf(recipe: PromptRecipe, opts: PromptOptions): string | undefined {
  const target = taskTarget(opts.task, opts.targetLanguage);
  if (target === undefined) return undefined;
  if (!recipe.translation)
    throw new WnwError(
      'BAD_ARGUMENT',
      'task "translate" is not available for this model: its prompt recipe has no translation; use task "transcribe"',
    );
  return target;
}

function instructionText(recipe: ChatRecipe, code: string | undefined): string {
  return code === undefined ? recipe.instruction.withoutLanguage : recipe.instruction.withLanguage(code);
}

function special(tok: TextTokenizer, s: string): number {
  const id = tok.tokenId(s);
  if (id === undefined)
    throw new ModelLoadError(tokenizerFile(tok), `has no ${s} token, which the transcription prompt needs`);
  return id;
}

const tokenizerFile = (tok: TextTokenizer) => (tok.format === 'tekken' ? 'tekken.json' : 'tokenizer.json');
