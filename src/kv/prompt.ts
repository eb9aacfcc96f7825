/**
 * The prompt as the policies see it, for either backend: its layout (the numbers a
 * policy plans with) and the sequence positions of its text, which every head keeps.
 */
import { audioStart, groupSize, segmentLength, type ModelConfig, type PromptIds } from '../model/config.js';
import type { PolicyLayout, SummaryFitting } from './plan.js';
import type { SummaryPlacement } from './residency.js';

/** The session's prompt: the one its options bring, else the config's own (load-time) prompt. */
export function sessionPrompt(c: ModelConfig, opts: { prompt?: PromptIds }): PromptIds {
  return opts.prompt ?? { prefix: c.prefix, instruction: c.instruction };
}

export function policyLayout(c: ModelConfig, audioLength: number, prompt: PromptIds = c): PolicyLayout {
  return {
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    groupSize: groupSize(c),
    headDim: c.headDim,
    audioLength,
    tokensPerSecond: c.audio.tokensPerSecond,
    segmentLength: segmentLength(c),
    instructionLength: prompt.instruction.length,
  };
}

/** Sequence positions of the prompt's text (prefix and instruction): KV every head keeps, never a policy's. */
export function textPositions(p: PromptIds, N: number): number[] {
  const a0 = audioStart(p);
  return [...p.prefix.map((_, i) => i), ...p.instruction.map((_, i) => a0 + N + i)];
}

/**
 * The prompt rows whose queries fit summary slots, [first, end): the instruction's, the
 * rows WnW's prefill scores come from (the last row where there is no instruction).
 */
export function instructionRows(p: PromptIds, N: number): [number, number] {
  const end = audioStart(p) + N + p.instruction.length;
  return [end - Math.max(1, p.instruction.length), end];
}

/**
 * The summary placement of a plan made under `fitting` (absent: the mean), from the
 * instruction rows' post-RoPE queries per layer ([rows, numHeads × headDim],
 * `instructionRows`): a KV head is handed the queries of its group, [rows × groupSize,
 * headDim]; `fitting.mass` gives its layer's scale of the mass correction.
 */
export function summaryPlacement(
  c: ModelConfig,
  fitting: SummaryFitting | undefined,
  layerQueries: (layer: number) => Float32Array,
): SummaryPlacement {
  const hd = c.headDim;
  const G = groupSize(c);
  const QD = c.numHeads * hd;
  const layerMass = fitting?.mass;
  return {
    fit: fitting?.fit ?? 'mean',
    ...(layerMass === undefined
      ? {}
      : { massScale: (head: number) => layerMass[Math.floor(head / c.numKvHeads)] ?? 1 }),
    queries: (head) => {
      const q = layerQueries(Math.floor(head / c.numKvHeads));
      const kh = head % c.numKvHeads;
      const rows = q.length / QD;
      const out = new Float32Array(rows * G * hd);
      for (let r = 0; r < rows; r++) out.set(q.subarray(r * QD + kh * G * hd, r * QD + (kh + 1) * G * hd), r * G * hd);
      return out;
    },
  };
}
