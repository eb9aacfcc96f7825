/**
 * The CPU backend's decode session: its placed KV (the residency over CPU page storage),
 * its position, and its steps, each computed by the backend's decoder as soon as it is
 * queued. `submit`/`read` give the WebGPU backend's pipelined steps the same tokens.
 */
import type { Residency } from '../../kv/residency.js';
import type { ResidencyStats, TransferStats } from '../../kv/types.js';
import type { StepPlan } from '../../kv/plan.js';
import type { DecodeSession, StepCounters, StepResult } from '../types.js';
import type { BackendRequest, CompiledReadouts, RawReadings } from '../readouts.js';
import { Lifetime } from '../session.js';
import { StepFifo } from '../step-fifo.js';
import type { CpuPageStorage } from './storage.js';

/** What a session's decode steps read and advance. */
export interface DecodeState {
  residency: Residency;
  storage: CpuPageStorage;
  request: BackendRequest;
  audioStart: number;
  audioLength: number;
  /** The next step's sequence position. */
  nextPos: number;
  returnLogits: boolean;
}

/** One step computed: the greedy token and what the request exports. */
export interface Decoded {
  token: number;
  logits?: Float32Array;
  readings: Omit<RawReadings, 'step'>;
}

export class CpuDecodeSession implements DecodeSession {
  private readonly life = new Lifetime('this decode session');
  private readonly queue = new StepFifo<Promise<StepResult>>();
  /** The last step queued: the next `submit(null)` is fed its token. */
  private last: Promise<StepResult> | null = null;
  private steps = 0;
  /** Rewound since the last step: a step fed null has no token to take. */
  private rewound = false;

  constructor(
    private readonly decode: (token: number) => Decoded,
    private readonly state: DecodeState,
    private readonly readouts: CompiledReadouts,
    readonly placed: TransferStats,
    /** The prefill's greedy token: what a first `submit(null)` feeds. */
    private readonly first: number,
    private readonly closeSession: (keepPrefill: boolean) => void,
  ) {}

  async step(token: number): Promise<StepResult> {
    this.submit(token);
    return this.read();
  }

  private run(token: number): StepResult {
    this.life.check();
    const d = this.decode(token);
    const step = this.steps++;
    return { token: d.token, logits: d.logits, observation: this.readouts.answer({ step, ...d.readings }) };
  }

  submit(token: number | null): void {
    this.life.check();
    if (token === null && this.rewound && !this.last)
      throw new RangeError('submit(null) right after a rewind: no step left its token; feed one');
    const prev = this.last;
    const run = prev
      ? prev.then((r) => this.run(token ?? r.token))
      : Promise.resolve().then(() => this.run(token ?? this.first));
    // A failure is reported by read; a step never read (discarded at close) must not be unhandled.
    run.catch(() => {});
    this.last = run;
    this.queue.push(run);
  }

  async read(): Promise<StepResult> {
    this.life.check();
    return this.queue.shift();
  }

  get position(): number {
    return this.state.nextPos;
  }

  async rewind(position: number): Promise<void> {
    this.life.check();
    if (!(Number.isInteger(position) && position <= this.state.nextPos))
      throw new RangeError(`rewind to position ${position}: the session is at ${this.state.nextPos}`);
    while (this.queue.length) await this.queue.shift();
    this.state.residency.truncateText(position);
    this.state.nextPos = position;
    this.last = null;
    this.rewound = true;
  }

  async apply(plan: StepPlan): Promise<TransferStats> {
    this.life.check();
    return this.state.residency.apply(plan);
  }

  residency(): ResidencyStats {
    this.life.check();
    return this.state.residency.stats();
  }

  /** The live residency (tests and the tide chart read page tables through it). */
  residencyState(): Residency {
    return this.state.residency;
  }

  counters(): StepCounters {
    return { dispatches: 0, submits: 0, buffers: 0, bindGroups: 0, poolGrowths: this.state.residency.growths };
  }

  close(keepPrefill = false): void {
    this.closeSession(keepPrefill);
  }

  /** Ends the session's steps (its backend's close of the session calls it once). */
  release(): void {
    this.life.end('closed');
    this.queue.clear();
  }
}
