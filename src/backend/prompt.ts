/**
 * The prompt as the policies see it, for either backend: its layout (the numbers a
 * policy plans with) and the sequence positions of its text, which every head keeps.
 */
import { audioStart, groupSize, segmentLength, type ModelConfig } from '../model/config.js';
import type { PolicyLayout } from '../kv/plan.js';

export function policyLayout(c: ModelConfig, audioLength: number): PolicyLayout {
  return {
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    groupSize: groupSize(c),
    headDim: c.headDim,
    audioLength,
    tokensPerSecond: c.audio.tokensPerSecond,
    segmentLength: segmentLength(c),
    instructionLength: c.instruction.length,
  };
}

/** Sequence positions of the prompt's text (prefix and instruction): KV every head keeps, never a policy's. */
export function textPositions(c: ModelConfig, N: number): number[] {
  const a0 = audioStart(c);
  return [...c.prefix.map((_, i) => i), ...c.instruction.map((_, i) => a0 + N + i)];
}
