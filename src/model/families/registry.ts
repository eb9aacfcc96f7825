/**
 * config.json's model_type → the family record that reads the folder. This is the one
 * look-up by name; everything after it holds the record. A new family is its file and one
 * entry here.
 */
import { qwen25Omni } from './qwen2-5-omni.js';
import { qwen2Audio } from './qwen2-audio.js';
import type { HfFamily } from './types.js';
import { voxtral } from './voxtral.js';

export const FAMILIES: readonly HfFamily[] = [voxtral, qwen2Audio, qwen25Omni];

export function familyFor(modelType: string): HfFamily | undefined {
  return FAMILIES.find((f) => f.modelType === modelType);
}

export type { HfFamily } from './types.js';
