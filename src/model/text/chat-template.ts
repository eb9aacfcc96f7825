/**
 * Renders a folder's chat template with @huggingface/jinja and cuts the rendered prompt
 * at the audio placeholder, so the runtime can put N audio embeddings where the processor
 * would have expanded the placeholder to N copies.
 */
import { Template } from '@huggingface/jinja';
import { ModelLoadError } from '../../errors.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string | Array<{ type: 'audio'; audio_url: string } | { type: 'text'; text: string }>;
}

/** Renders `template` for `messages` with the generation prompt appended. */
export function renderChat(
  template: string,
  messages: ChatMessage[],
  extra: Record<string, unknown> = {},
  file = 'chat_template',
): string {
  try {
    return new Template(template).render({ messages, add_generation_prompt: true, ...extra });
  } catch (e) {
    throw new ModelLoadError(file, `cannot render the chat template (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** The text before and after the one `placeholder` in `rendered`. */
export function splitAtPlaceholder(
  rendered: string,
  placeholder: string,
  file = 'chat_template',
): { before: string; after: string } {
  const at = rendered.indexOf(placeholder);
  if (at < 0 || rendered.indexOf(placeholder, at + 1) >= 0) {
    throw new ModelLoadError(
      file,
      `the rendered prompt must contain the audio placeholder ${placeholder} exactly once`,
    );
  }
  return { before: rendered.slice(0, at), after: rendered.slice(at + placeholder.length) };
}
