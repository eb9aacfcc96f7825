/**
 * Queuing one decode step on the WebGPU backend: the next position's uniforms, the pool's
 * changed tables, the rows recalled since the last step (staged, copied by the step's own
 * encoder) and one submit. Fed `token`, or with null the greedy token the step before it
 * wrote on the GPU. Nothing here waits for the GPU: a loop may queue step t + 1 before it
 * reads step t (backend.ts `readStep`).
 */
import type { ModelConfig } from '../../model/config.js';
import type { GpuContext } from '../../gpu/device.js';
import type { Kernels } from './kernels.js';
import { GpuPool } from './pool.js';
import { stagingBytes } from './pool-layout.js';
import type { Session } from './session-state.js';
import type { DecodeStep } from './step.js';

export function queueStep(
  ctx: GpuContext,
  c: ModelConfig,
  kernels: Kernels,
  s: Session,
  token: number | null,
  makeStep: (pool: GpuPool) => DecodeStep,
): void {
  const res = s.residency;
  const pool = s.pool;
  if (!res || !pool || !s.step) throw new Error('step() before applyPrefill()');
  if (token === null ? s.submitted === 0 : !Number.isInteger(token) || token < 0 || token >= c.vocabSize) {
    throw new RangeError(
      token === null
        ? 'submitStep(null) before any step: the first token comes from the CPU'
        : `token ${token} outside vocabulary`,
    );
  }
  ctx.check();
  const slot = s.ring.nextSlot();
  const pos = s.nextPos++;
  res.appendText(pos, s.slots);
  let growth: Promise<Error | null> = Promise.resolve(null);
  // The pool grew (this token's text page, or the last plan's recalls): bind its new buffers.
  if (pool.generation !== s.stepGeneration) {
    growth = pool.growthFailure;
    // The old step's uniforms may still be read by a queued step: WebGPU defers their free.
    s.step.destroy();
    s.step = makeStep(pool);
    s.stepGeneration = pool.generation;
  }
  const step = s.step;
  const q = ctx.device.queue;
  s.stepState[0] = pos;
  s.stepState.set(s.slots, 4);
  q.writeBuffer(s.buffers.step, 0, s.stepState);
  let bytes = s.stepState.byteLength + s.pendingBytes;
  s.pendingBytes = 0;
  if (token !== null) {
    s.tokenIn[0] = token;
    q.writeBuffer(s.buffers.tokenIn, 0, s.tokenIn);
    bytes += 4;
  }
  bytes += pool.flush(res);
  const splits = Math.max(1, Math.ceil(GpuPool.maxPages(res) / kernels.pagesPerSplit));
  // Rows recalled from here on ride in the step's own encoder (row-staging.ts).
  pool.stageWrites(stagingBytes(pool.layout.bytes));
  q.submit([step.encode(splits, slot, (enc) => pool.encodeStaged(enc))]);
  s.submitted++;
  s.ring.submitted({
    slot,
    growth,
    // A growth of the pool (text pages, recalls) copies it in submits of its own since the last step's.
    counters: {
      dispatches: step.dispatchCount,
      dispatchesPerLayer: step.layerDispatches,
      submits: 1,
      growthSubmits: pool.submits - s.poolSubmits,
      readbackBytes: step.readbackBytes,
      bytesToGpu: bytes,
    },
  });
  s.poolSubmits = pool.submits;
  s.reader = step;
}
