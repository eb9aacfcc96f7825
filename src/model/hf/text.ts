/**
 * The text side of a Hugging Face folder: its tokenizer and its transcription prompt, built
 * by src/model/text (tekken.json or tokenizer.json; the folder's chat template), checked
 * against config.json: the audio placeholder and the stop tokens must be the config's ids.
 */
import { ModelLoadError } from '../../errors.js';
import type { ModelConfig } from '../config.js';
import type { HfFamily } from '../families/types.js';
import { joinModelPath } from '../files.js';
import { findChatTemplate, loadTextTokenizer } from '../text/load.js';
import { buildPrompt } from '../text/prompt.js';
import type { TextTokenizer } from '../text/types.js';

export interface HfText {
  tokenizer: TextTokenizer;
  prefix: number[];
  instruction: number[];
  /** The config's stop tokens, then any the tokenizer adds. */
  stopTokens: number[];
}

/** `language`: an ISO code such as "en"; omitted, the prompt lets the model detect it. */
export async function loadHfText(
  base: string,
  family: HfFamily,
  config: ModelConfig,
  audioTokenId: number,
  language?: string,
): Promise<HfText> {
  const tokenizer = await loadTextTokenizer(base);
  const found = await findChatTemplate(base);
  const p = buildPrompt(family.prompt, tokenizer, {
    language,
    chatTemplate: found?.template,
    chatTemplateFile: found?.file,
  });
  const file = joinModelPath(base, tokenizer.format === 'tekken' ? 'tekken.json' : 'tokenizer.json');
  if (p.audioToken !== audioTokenId) {
    throw new ModelLoadError(
      file,
      `its audio placeholder is id ${p.audioToken} but config.json says ${audioTokenId}: the tokenizer belongs to another model`,
    );
  }
  if (!p.stopTokens.includes(config.tokens.eos)) {
    throw new ModelLoadError(
      file,
      `its stop tokens [${p.stopTokens}] do not include the config's eos ${config.tokens.eos}: the tokenizer belongs to another model`,
    );
  }
  for (const t of [...p.prefix, ...p.instruction]) {
    if (!(t >= 0 && t < config.vocabSize))
      throw new ModelLoadError(file, `prompt token ${t} is outside the model's vocabulary (${config.vocabSize})`);
  }
  const stopTokens = [...config.stopTokens, ...p.stopTokens.filter((t) => !config.stopTokens.includes(t))];
  return { tokenizer, prefix: p.prefix, instruction: p.instruction, stopTokens };
}
