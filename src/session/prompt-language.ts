/**
 * A Hugging Face model's transcription prompt for another language than the one it was
 * loaded with: the family's recipe (src/model/text/prompt.ts) rebuilt with the folder's
 * chat template. Our own models' prompts name no language.
 */
import { WnwError } from '../errors.js';
import type { PromptIds } from '../model/config.js';
import type { LoadedModel } from '../model/loader.js';
import { buildPrompt, findChatTemplate } from '../model/text/index.js';

export async function promptForLanguage(model: LoadedModel, language: string | undefined): Promise<PromptIds> {
  if (!model.family || !model.text) {
    throw new WnwError('BAD_ARGUMENT', `the model "${model.config.name}" takes no language option (its prompt names no language); omit language`);
  }
  const found = await findChatTemplate(model.base);
  const p = buildPrompt(model.family.prompt, model.text, { language, chatTemplate: found?.template, chatTemplateFile: found?.file });
  return { prefix: p.prefix, instruction: p.instruction };
}
