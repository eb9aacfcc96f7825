/** Tokenizers and transcription prompts for the reference model and the real backbones. */
export type { TextTokenizer, TokenStream, TokenizerFormat } from './types.js';
export { HfTokenizer, type HfTokenizerOptions } from './hf.js';
export { TekkenTokenizer } from './tekken.js';
export {
  loadTextTokenizer,
  tokenizerFromFiles,
  readChatTemplate,
  findChatTemplate,
  chatTemplateFrom,
  type TokenizerFiles,
  type LoadTokenizerOptions,
} from './load.js';
export {
  buildPrompt,
  conversationSystem,
  followUpIds,
  promptIds,
  PROMPT_TASKS,
  type PromptTask,
  type PromptRecipe,
  type ChatRecipe,
  type MistralRecipe,
  type PromptOptions,
  type AudioPrompt,
} from './prompt.js';
export { languageCode, LANGUAGE_FORMS, NO_LANGUAGE } from './language.js';
export { MISTRAL_PATTERN } from './patterns.js';
