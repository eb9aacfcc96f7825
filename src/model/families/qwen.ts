/**
 * What the two Qwen speech models share: the prompt's ChatML turns ending in <|im_end|>
 * with the audio span <|audio_bos|><|AUDIO|><|audio_eos|>, and the audio tower's tail
 * (2× average pooling, a layer norm, then a Linear with bias to the decoder's width).
 */
import type { ChatRecipe } from '../text/prompt.js';
import type { PostStep } from './types.js';

/** English names for the instructions that name a language; a code without one is named by itself. */
const LANGUAGE_NAMES: Record<string, string> = {
  en: 'English', zh: 'Chinese', de: 'German', fr: 'French', es: 'Spanish', it: 'Italian', ja: 'Japanese',
  ko: 'Korean', ru: 'Russian', pt: 'Portuguese', nl: 'Dutch', ar: 'Arabic', hi: 'Hindi',
};

export const languageName = (code: string): string => LANGUAGE_NAMES[code] ?? code;

export const QWEN_CHAT = {
  stop: ['<|im_end|>', '<|endoftext|>'],
  audioTokens: { audio: '<|AUDIO|>', bos: '<|audio_bos|>', eos: '<|audio_eos|>' },
} satisfies Pick<ChatRecipe, 'stop' | 'audioTokens'>;

/** avg-pool 2 → `norm` → `projector` (with bias), by tensor name prefix. */
export function poolNormProject(norm: string, projector: string): PostStep[] {
  return [
    { op: 'avgpool', size: 2 },
    { op: 'layernorm', name: norm },
    { op: 'linear', name: projector, bias: true },
  ];
}
