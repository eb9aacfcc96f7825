/**
 * Per-buffer limits (`maxStorageBufferBindingSize`, `maxBufferSize`) and the weight tensors
 * they refuse: the embedding and the lm_head are split by rows across bindings, but each
 * layer matrix is read whole by its kernel, so one larger than a binding cannot run in that
 * format at all. fit.ts judges a whole recording with these.
 */
import { matrixFormat } from '../../model/packed-weights.js';
import { rowBytes, type WeightFormat } from '../../model/quant.js';
import type { ModelConfig } from '../../model/config.js';

export interface DeviceLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
}

/** Where no adapter is asked (the CPU backend, the memory bench): buffers up to 2 GiB. */
export const UNBOUNDED_LIMITS: DeviceLimits = { maxStorageBufferBindingSize: 2 ** 31 - 4, maxBufferSize: 2 ** 31 - 4 };

export type FitLimit = 'maxStorageBufferBindingSize' | 'maxBufferSize' | 'deviceMemory';

export interface FitProblem {
  limit: FitLimit;
  /** What does not fit: a weight tensor (`layers.*.gate_up`), a session buffer, the KV pool. */
  what: string;
  bytes: number;
  limitBytes: number;
  /** What would make it fit. */
  advice: string;
  /** The whole sentence: what, how large, which limit, what to do. */
  message: string;
}

export function problem(p: Omit<FitProblem, 'message'>): FitProblem {
  const over = p.limit === 'deviceMemory' ? 'the memory this device has' : `this device's ${p.limit}`;
  return { ...p, message: `${p.what} needs ${mib(p.bytes)}, over ${over} (${mib(p.limitBytes)}): ${p.advice}.` };
}

export const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

/** The largest buffer one storage binding takes, and which of the two limits sets it. */
export function bindingLimitOf(limits: DeviceLimits): { bytes: number; limit: FitLimit } {
  return limits.maxBufferSize < limits.maxStorageBufferBindingSize
    ? { bytes: limits.maxBufferSize, limit: 'maxBufferSize' }
    : { bytes: limits.maxStorageBufferBindingSize, limit: 'maxStorageBufferBindingSize' };
}

/** The layer matrices as the WebGPU backend stores them: [name, rows, cols] (Q/K/V and gate/up stacked). */
function layerMatrices(c: ModelConfig): [string, number, number][] {
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  return [
    ['qkv', QD + 2 * KVD, c.hiddenSize],
    ['o_proj', c.hiddenSize, QD],
    ['gate_up', 2 * c.intermediateSize, c.hiddenSize],
    ['down_proj', c.hiddenSize, c.intermediateSize],
  ];
}

const SMALLER: Record<WeightFormat, WeightFormat[]> = { f32: ['f16', 'q4'], f16: ['q4'], q4: [] };

/** The smaller formats in which every [rows, cols] matrix of `shapes` fits one binding. */
function formatsThatFit(format: WeightFormat, shapes: [number, number][], bind: number): WeightFormat[] {
  return SMALLER[format].filter((f) =>
    shapes.every(([rows, cols]) => rows * rowBytes(matrixFormat(f, cols), cols) <= bind),
  );
}

/**
 * A matrix read whole by its kernel that one binding cannot hold, or null; `fitsIn`: the
 * formats to suggest (default: those in which this matrix fits).
 */
export function matrixBindingProblem(
  name: string,
  format: WeightFormat,
  rows: number,
  cols: number,
  limits: DeviceLimits,
  fitsIn?: WeightFormat[],
): FitProblem | null {
  const bind = bindingLimitOf(limits);
  const bytes = rows * rowBytes(format, cols);
  if (bytes <= bind.bytes) return null;
  fitsIn ??= formatsThatFit(format, [[rows, cols]], bind.bytes);
  const advice = fitsIn.length
    ? `store the decoder weights as ${fitsIn.join(' or ')} ` +
      `(npx wnw convert HF_DIR OUT_DIR --quant ${fitsIn[fitsIn.length - 1]}, or weightFormat '${fitsIn[fitsIn.length - 1]}')`
    : 'no weight format makes it fit one binding on this device: use a device with a larger storage binding limit';
  return problem({
    limit: bind.limit,
    what: `${name} (${format}, ${rows} × ${cols})`,
    bytes,
    limitBytes: bind.bytes,
    advice,
  });
}

/**
 * The weight tensors one binding cannot hold in `format` (one entry per layer matrix, the
 * same in every layer); empty when every tensor can be uploaded. The embedding and the
 * lm_head are split by rows and fail only if 64 rows pass a binding.
 */
export function weightBindingProblems(c: ModelConfig, format: WeightFormat, limits: DeviceLimits): FitProblem[] {
  const bind = bindingLimitOf(limits);
  const fitsIn = formatsThatFit(
    format,
    layerMatrices(c).map(([, rows, cols]) => [rows, cols]),
    bind.bytes,
  );
  const problems: FitProblem[] = [];
  for (const [name, rows, cols] of layerMatrices(c)) {
    const p = matrixBindingProblem(`layers.*.${name}`, matrixFormat(format, cols), rows, cols, limits, fitsIn);
    if (p) problems.push(p);
  }
  const embedRows = 64 * rowBytes(matrixFormat(format, c.hiddenSize), c.hiddenSize);
  if (embedRows > bind.bytes) {
    problems.push(
      problem({
        limit: bind.limit,
        what: 'embed_tokens / lm_head (64 rows)',
        bytes: embedRows,
        limitBytes: bind.bytes,
        advice: 'use a device with a larger storage binding limit',
      }),
    );
  }
  return problems;
}
