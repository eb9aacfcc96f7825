/**
 * A Hugging Face model's prompt for another language than the one it was loaded with, or
 * for a translation: the family's recipe (src/model/text/prompt.ts) rebuilt with the
 * folder's chat template. Our own models' prompts name no language and do no translation.
 */
import { WnwError } from '../errors.js';
import type { PromptIds } from '../model/config.js';
import type { LoadedModel } from '../model/loader.js';
import { buildPrompt, findChatTemplate, type PromptOptions } from '../model/text/index.js';

export async function promptForLanguage(
  model: LoadedModel,
  language: string | undefined,
  task: Pick<PromptOptions, 'task' | 'targetLanguage'> = {},
): Promise<PromptIds> {
  if (!model.family || !model.text) {
    const what =
      task.task === 'translate'
        ? 'no task "translate" (its prompt is for transcription only)'
        : 'no language option (its prompt names no language); omit language';
    throw new WnwError('BAD_ARGUMENT', `the model "${model.config.name}" takes ${what}`);
  }
  const found = await findChatTemplate(model.base);
  const p = buildPrompt(model.family.prompt, model.text, {
    language,
    ...task,
    chatTemplate: found?.template,
    chatTemplateFile: found?.file,
  });
  return { prefix: p.prefix, instruction: p.instruction };
}
