/**
 * A Hugging Face model's prompt for another language than the one it was loaded with, or
 * for a translation: the family's recipe (src/model/text/prompt.ts) rebuilt with the
 * folder's chat template. Our own models' prompts name no language and do no translation.
 */
import { WnwError } from '../errors.js';
import type { PromptIds } from '../model/config.js';
import type { LoadedModel } from '../model/loader.js';
import { buildPrompt, findChatTemplate, followUpIds, type PromptOptions } from '../model/text/index.js';

export async function promptForLanguage(
  model: LoadedModel,
  language: string | undefined,
  task: Pick<PromptOptions, 'task' | 'targetLanguage' | 'question' | 'system'> = {},
): Promise<PromptIds> {
  const { family, text } = chatModel(model, task);
  const found = await findChatTemplate(model.base);
  const p = buildPrompt(family.prompt, text, {
    language,
    ...task,
    chatTemplate: found?.template,
    chatTemplateFile: found?.file,
  });
  return { prefix: p.prefix, instruction: p.instruction };
}

/** The ids that ask `question` after an answer of a conversation whose system message is `system`. */
export async function followUpFor(
  model: LoadedModel,
  question: string,
  system: string | null | undefined,
): Promise<number[]> {
  const { family, text } = chatModel(model, { question });
  const found = await findChatTemplate(model.base);
  return followUpIds(family.prompt, text, question, {
    chatTemplate: found?.template,
    chatTemplateFile: found?.file,
    ...(system !== undefined ? { system } : {}),
  });
}

/** The model's family and tokenizer, which a prompt other than its own transcription needs. */
function chatModel(model: LoadedModel, task: Pick<PromptOptions, 'task' | 'question'>) {
  if (model.family && model.text) return { family: model.family, text: model.text };
  const what =
    task.question !== undefined
      ? 'no questions (its prompt is for transcription only); use transcribe'
      : task.task === 'translate'
        ? 'no task "translate" (its prompt is for transcription only)'
        : 'no language option (its prompt names no language); omit language';
  throw new WnwError('BAD_ARGUMENT', `the model "${model.config.name}" takes ${what}`);
}
