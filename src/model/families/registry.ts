/** config.json's model_type → the family that reads the folder. */
import { qwen25Omni } from './qwen2-5-omni.js';
import { qwen2Audio } from './qwen2-audio.js';
import type { HfFamily } from './types.js';
import { voxtral } from './voxtral.js';

export const FAMILIES: readonly HfFamily[] = [voxtral, qwen2Audio, qwen25Omni];

export function familyFor(modelType: string): HfFamily | undefined {
  return FAMILIES.find((f) => f.modelType === modelType);
}

export type { HfFamily } from './types.js';
