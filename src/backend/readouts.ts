/**
 * What a decode step reads back, by name. The policy's request (kv/plan.ts
 * `AttentionRequest`) and the session's other readers (word timing, the tide chart,
 * evaluation) each ask for their own readout and find it under their own key of the step's
 * observation. Here they become what the device exports and reduces: one list of exported
 * rows whose first rows the device may reduce (shaders/chunk_select.wgsl, focus.wgsl), and
 * what is left to reduce on the CPU (src/reference) where a reduction's heads are not rows
 * the device can sum. No reader knows where its rows sit in the export.
 */
import type { AttentionRequest, StepObservation } from '../kv/plan.js';
import { chunkObservation } from '../reference/chunk-select.js';
import { anchorSum, focusOfRows } from '../reference/focus.js';

/** Readouts beside the policy's own, each answered under its name in the step's observation. */
export interface Readouts {
  /** `focus`: word timing's focus (reference/focus.ts `focusOf`) of these heads' summed weights. */
  focus?: readonly number[];
  /** `segmentSums`: these heads' summed weights per segment (the tide chart's anchor attention). */
  segmentSums?: readonly number[];
  /** `attention`: these heads' weights, in this order (evaluation). */
  attention?: readonly number[];
}

/** A step's readings: the policy's observation and the session's other readouts. */
export interface StepReadings extends StepObservation {
  /** With `Readouts.focus`: an audio position, -1 where the heads hold no mass. */
  focus?: number;
  /** With `Readouts.attention`: per head asked, Float32Array[audioLength]. */
  attention?: Float32Array[];
}

/** What the device exports and reduces each step: the kernels' side of the readouts. */
export interface ExportRequest {
  /** KV heads whose audio weights the step exports, in row order. */
  decodeHeads: number[];
  decodeQueries?: boolean;
  /** Whether the exported rows themselves are read back (else only what is reduced from them). */
  decodeWeights?: boolean;
  /** The chunk choice over the first `heads` rows; `segmentSums` also reads their per-segment sums. */
  decodeChunks?: { heads: number; chunkSegments: number; topChunks: number; segmentSums?: boolean };
  /** focus.wgsl over the first `heads` rows. */
  decodeFocus?: { heads: number };
}

/** The backend's request: the policy's prefill asks and the device's exports. */
export type BackendRequest = Omit<AttentionRequest, keyof ExportRequest> & ExportRequest;

/** A step's raw readback: every exported row and what the device reduced. */
export interface RawReadings {
  step: number;
  weights: Float32Array[];
  queries?: Float32Array[];
  chunks?: Int32Array;
  segmentSums?: Float32Array;
  focus?: number;
}

/** The readouts of a session compiled once: the device's request, and how a raw readback answers each name. */
export class CompiledReadouts {
  readonly request: BackendRequest;
  /** The policy's own rows come first in the export: this many. */
  private readonly own: number;
  private readonly policyWeights: boolean;
  private readonly attentionRows: number[];
  /** Rows to reduce on the CPU, where the device cannot. */
  private readonly cpuFocus: number[] | null;
  private readonly cpuSums: number[] | null;

  constructor(
    policy: AttentionRequest,
    readouts: Readouts,
    private readonly audioLength: number,
    private readonly segmentLength: number,
  ) {
    const focusHeads = readouts.focus ?? [];
    const sumHeads = readouts.segmentSums ?? [];
    const attention = readouts.attention ?? [];
    const extra = [...new Set([...focusHeads, ...sumHeads, ...attention])].filter(
      (h) => !policy.decodeHeads.includes(h),
    );
    const rows = [...policy.decodeHeads, ...extra];
    const rowOf = (heads: readonly number[]) => heads.map((h) => rows.indexOf(h));
    // The device sums the export's first rows, in order: a reduction runs there when its heads are those rows.
    const leading = (idx: number[]) => idx.length > 0 && idx.every((r, j) => r === j);
    const focusRows = rowOf(focusHeads);
    const sumRows = rowOf(sumHeads);
    const dc = policy.decodeChunks;
    const deviceFocus = leading(focusRows);
    const deviceSums = leading(sumRows) && dc?.heads === sumRows.length;
    this.cpuFocus = focusRows.length && !deviceFocus ? focusRows : null;
    this.cpuSums = sumRows.length && !deviceSums ? sumRows : null;
    this.attentionRows = rowOf(attention);
    this.own = policy.decodeHeads.length;
    this.policyWeights = this.own > 0 && policy.decodeWeights !== false;
    const decodeWeights = this.policyWeights || attention.length > 0 || this.cpuFocus !== null || this.cpuSums !== null;
    this.request = {
      ...policy,
      decodeHeads: rows,
      decodeWeights,
      decodeChunks: dc && deviceSums ? { ...dc, segmentSums: true } : dc,
      ...(deviceFocus ? { decodeFocus: { heads: focusRows.length } } : {}),
    };
  }

  /** The readings under their names, from a raw readback. */
  answer(raw: RawReadings): StepReadings {
    const { step, weights, queries, chunks } = raw;
    const N = this.audioLength;
    const out: StepReadings = {
      step,
      weights: this.policyWeights ? weights.slice(0, this.own) : [],
      ...(queries ? { queries: queries.slice(0, this.own) } : {}),
      ...(chunks ? { chunks } : {}),
    };
    if (this.attentionRows.length) out.attention = this.attentionRows.map((r) => weights[r]);
    if (this.cpuFocus) out.focus = focusOfRows(weights, this.cpuFocus, N);
    else if (raw.focus !== undefined) out.focus = raw.focus;
    if (this.cpuSums) out.segmentSums = segmentSumsOf(anchorSum(weights, this.cpuSums, N)!, this.segmentLength);
    else if (raw.segmentSums) out.segmentSums = raw.segmentSums;
    return out;
  }
}

/** Per segment of `n` positions: the summed weights (the CPU's side of the tide chart). */
function segmentSumsOf(sum: Float32Array, n: number): Float32Array {
  const out = new Float32Array(Math.ceil(sum.length / n));
  for (let p = 0; p < sum.length; p++) out[Math.floor(p / n)] += sum[p];
  return out;
}

/**
 * The reductions a request asks of exported rows, as the device makes them: the chunk
 * choice (reference/chunk-select.ts) and the focus (reference/focus.ts). The CPU backend
 * answers its raw readings with these.
 */
export function deviceReductions(
  weights: Float32Array[],
  req: ExportRequest,
  N: number,
  segmentLength: number,
): Pick<RawReadings, 'chunks' | 'segmentSums' | 'focus'> {
  const out: Pick<RawReadings, 'chunks' | 'segmentSums' | 'focus'> = chunkObservation(
    weights,
    req.decodeChunks,
    N,
    segmentLength,
  );
  if (req.decodeFocus)
    out.focus = focusOfRows(
      weights,
      Array.from({ length: req.decodeFocus.heads }, (_, i) => i),
      N,
    );
  return out;
}
