/** The WebGPU backend's state of one session (backend.ts), from begin() to end(). */
import type { Residency } from '../../kv/residency.js';
import type { SessionOptions } from '../types.js';
import type { GpuPool } from './pool.js';
import type { PrefillBuffers, SessionBuffers } from './session.js';
import type { DecodeStep } from './step.js';
import type { StepRing } from './step-ring.js';

export interface Session {
  opts: SessionOptions;
  buffers: SessionBuffers;
  prefill: PrefillBuffers | null;
  /** Resolves to an error when begin()'s allocations failed (OOM is only known asynchronously). */
  allocation: Promise<Error | null>;
  residency: Residency | null;
  /** The pool and the decode step over it: made at applyPrefill, sized by the plan. */
  pool: GpuPool | null;
  step: DecodeStep | null;
  /** The pool's generation the decode step's bind groups were made for. */
  stepGeneration: number;
  nextPos: number;
  steps: number;
  /** Steps queued for readback (step-ring.ts), the steps submitted so far, and the step that reads a slot. */
  ring: StepRing;
  submitted: number;
  reader: DecodeStep | null;
  /** CPU→GPU bytes written since the last submit (recalled rows), counted with the next step. */
  pendingBytes: number;
  /** The pool's growth submits counted up to the last step. */
  poolSubmits: number;
  slots: Int32Array;
  stepState: Uint32Array<ArrayBuffer>;
  tokenIn: Int32Array<ArrayBuffer>;
}
