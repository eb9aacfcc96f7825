/**
 * What the two Qwen speech models share: the prompt's ChatML turns ending in <|im_end|>
 * with the audio span <|audio_bos|><|AUDIO|><|audio_eos|>, and the audio tower's tail
 * (2× average pooling, a layer norm, then a Linear with bias to the decoder's width).
 */
import type { ChatRecipe } from '../text/prompt.js';
import type { PostStep } from './types.js';

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
