/**
 * The pipelined step (`submitStep`/`readStep`) for a backend whose `step` computes on the
 * CPU: each queued step runs after the one before it, fed its token or the token that step
 * predicts, so a loop written for the WebGPU backend's queue gives the same tokens here.
 */
import type { StepResult } from './types.js';

export class StepQueue {
  private last: Promise<StepResult> | null = null;
  private readonly pending: Promise<StepResult>[] = [];
  private epoch = 0;

  submit(token: number | null, step: (token: number) => Promise<StepResult>): void {
    const prev = this.last;
    if (token === null && !prev) throw new Error('submitStep(null): no step queued before it to predict the token');
    const epoch = this.epoch;
    const run = prev
      ? prev.then((r) => {
          // A step queued before clear() (end of session) must not run in the next session.
          if (epoch !== this.epoch) throw new Error('step discarded: its session ended');
          return step(token ?? r.token);
        })
      : step(token!);
    // A failure is reported by readStep; a step never read (discarded) must not be unhandled.
    run.catch(() => {});
    this.last = run;
    this.pending.push(run);
  }

  read(): Promise<StepResult> {
    const p = this.pending.shift();
    if (!p) throw new Error('readStep(): no step queued');
    return p;
  }

  /** Steps queued and not yet read. */
  get queued(): number {
    return this.pending.length;
  }

  clear(): void {
    this.epoch++;
    this.last = null;
    this.pending.length = 0;
  }
}
