/**
 * The language option, one reading for the CLI, load(), transcribe() and the prompt: a
 * language code, or "none" for no language, where the family's prompt without a language
 * lets the model detect it. Anything else is a BAD_ARGUMENT that lists what is accepted,
 * never a word spliced into the prompt ("Transcribe the none audio").
 */
import { WnwError } from '../../errors.js';

/** The value that asks for no language. */
export const NO_LANGUAGE = 'none';

/** The forms the option accepts, as messages list them. */
export const LANGUAGE_FORMS = `a language code of 2 or 3 letters (ISO 639) such as "en" or "yue", or "${NO_LANGUAGE}" for no language (the model detects it)`;

/** Whether the option takes `value` (omitted, "none" or a code). */
export const isLanguageOption = (value: unknown): boolean =>
  value === undefined || value === NO_LANGUAGE || (typeof value === 'string' && /^[a-z]{2,3}$/i.test(value));

/** `value` as the prompt takes it: a lower-case code, or undefined for no language (omitted or "none"). */
export function languageCode(value: unknown, option = 'language'): string | undefined {
  if (value === undefined || value === NO_LANGUAGE) return undefined;
  if (typeof value === 'string' && isLanguageOption(value)) return value.toLowerCase();
  const shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
  throw new WnwError('BAD_ARGUMENT', `option ${option} must be ${LANGUAGE_FORMS}, got ${shown}`);
}
