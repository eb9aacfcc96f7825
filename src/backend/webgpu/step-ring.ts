/**
 * The readback ring of the decode loop: each submitted step copies its results (token,
 * optionally logits, the exported attention or chunk choice) into its own slot, and the
 * slot is mapped when the step is read. A loop that submits step t + 1 before it reads
 * step t keeps the GPU busy while the CPU maps, schedules and encodes. The ring starts with
 * RING_SLOTS slots and takes one more where a loop runs further ahead of its reads.
 */
import type { StepCounters } from '../types.js';
import { StepFifo } from '../step-fifo.js';

/** Enough for one step read while one is queued, and one more being encoded. */
export const RING_SLOTS = 3;

/** What a step's submission knew: its counters but the waits, and what its read must check first. */
export interface Submitted {
  slot: GPUBuffer;
  map: Promise<void>;
  /** A pool growth made for this step: resolves to its out-of-memory error, or null; null where the pool did not grow. */
  growth: Promise<Error | null> | null;
  counters: Omit<StepCounters, 'cpuWaits' | 'buffers' | 'bindGroups' | 'poolGrowths'>;
}

const ignore = () => {};

export class StepRing {
  private readonly queue = new StepFifo<Submitted>();
  private next = 0;

  /** `slots`: the ring's first slots; `more` makes another where every slot is still queued. */
  constructor(
    private readonly slots: GPUBuffer[],
    private readonly more: () => GPUBuffer,
  ) {}

  /** The slot the next submitted step copies into: never one still queued. */
  nextSlot(): GPUBuffer {
    const slot = this.slots[this.next];
    if (!this.queue.some((q) => q.slot === slot)) return slot;
    this.slots.splice(this.next, 0, this.more());
    return this.slots[this.next];
  }

  /** Records a submitted step; its slot is mapped as soon as the GPU is done with it. */
  submitted(s: Omit<Submitted, 'map'>): void {
    this.next = (this.next + 1) % this.slots.length;
    const map = s.slot.mapAsync(GPUMapMode.READ);
    // A step discarded unread (a stop token read one step late, end()) must not reject unhandled.
    map.catch(ignore);
    this.queue.push({ slot: s.slot, map, growth: s.growth, counters: s.counters });
  }

  get queued(): number {
    return this.queue.length;
  }

  /**
   * The oldest queued step, its slot mapped: `waited` is 1 when nothing was queued behind
   * it, so the GPU had no work while the CPU waited (a wait on the critical path).
   */
  async oldest(): Promise<{ step: Submitted; waited: number }> {
    const step = this.queue.shift();
    const waited = this.queue.length === 0 ? 1 : 0;
    // Most steps grew nothing: one wait, the map's.
    if (step.growth) {
      const failed = await step.growth;
      if (failed) throw failed;
    }
    await step.map;
    return { step, waited };
  }

  /** Forgets queued steps (end of a session: their buffers are destroyed with it). */
  clear(): void {
    this.queue.clear();
    this.next = 0;
  }
}
