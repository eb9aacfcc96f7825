/**
 * One WebGPU session, from `open` to `close`: the prefill stage (whole prompt or layer by
 * layer) and the decode session the placement returns. Everything per transcription lives
 * here and is freed by `close`; the backend keeps only the device, kernels and weights.
 *
 * A decode step is queued by `submit` (the next position's uniforms, the pool's changed
 * tables, the rows recalled since the last step staged into the step's own encoder, one
 * submit) and read by `read` (its readback slot mapped). Nothing in `submit` waits for the
 * GPU: a loop may queue step t + 1 before it reads step t.
 */
import { audioStart, kvHeadCount, type ModelConfig } from '../../model/config.js';
import { Residency, type KvSource } from '../../kv/residency.js';
import { checkPoolLimit, grownTextPages, poolNeed } from '../../kv/sizing.js';
import { slotBytes } from '../../kv/precision.js';
import type { ResidencyStats, TransferStats } from '../../kv/types.js';
import type { Gather } from '../../kv/storage.js';
import type { LayerPrefill, PrefillPlan, StepPlan } from '../../kv/plan.js';
import type { GpuContext } from '../../gpu/device.js';
import { policyLayout, textPositions } from '../../kv/prompt.js';
import type { DecodeSession, LayeredPrefillResult, StepCounters, StepResult } from '../types.js';
import { Lifetime } from '../session.js';
import type { CompiledReadouts } from '../readouts.js';
import type { SessionShape } from '../session.js';
import type { Kernels } from './kernels.js';
import { GpuPool } from './pool.js';
import type { EncodedWrites } from './step-writes.js';
import { poolLayout, residencyShape, shardedLayout, stagingBytes, type PoolLayout } from './pool-layout.js';
import { placePlan, runPrefill } from './prefill.js';
import { LayerPlacer } from './layered.js';
import { runTriage } from './triage.js';
import type { ClipTriage } from '../types.js';
import type { TriageKernels } from './triage-ops.js';
import type { PrefillBuffers, SessionBuffers } from './session-buffers.js';
import { DecodeStep } from './step.js';
import { StepRing } from './step-ring.js';
import type { GpuWeights } from './weights.js';

/** What a session uses of the backend that opened it (long-lived, shared by its sessions). */
export interface WebGpuEngine {
  readonly ctx: GpuContext;
  readonly config: ModelConfig;
  readonly kernels: Kernels;
  readonly weights: GpuWeights;
  readonly elementBytes: number;
  /** Bytes one storage binding may hold. */
  readonly bindLimit: number;
  readonly kvMaxBytes?: number;
  /** How the pool grows for text on demand: pages per head at once, and the byte cap (kvMaxBytes) in pages. */
  growth(): { growPages: number; maxPages?: number };
  /** `make` inside error scopes: its out-of-memory or validation failure, typed, resolves later. */
  scoped<T>(make: () => T, what: string, bytes: number): { value: T; failure: Promise<Error | null> };
}

/** A session before its decode: its buffers, and the prefill buffers until the KV is placed. */
export class WebGpuSessionParts {
  private prefillBuffers: PrefillBuffers | null;
  private decode: WebGpuDecodeSession | null = null;
  private closed = false;
  /** The prefill's greedy token, for the decode session's first `submit(null)`. */
  private prefillToken = -1;

  constructor(
    private readonly e: WebGpuEngine,
    private readonly shape: SessionShape,
    private readonly readouts: CompiledReadouts,
    private readonly buffers: SessionBuffers,
    prefill: PrefillBuffers,
    /** Resolves to an error when the buffers' allocation failed (OOM is only known asynchronously). */
    private readonly allocation: Promise<Error | null>,
  ) {
    this.prefillBuffers = prefill;
  }

  private checkEmbeddings(audioEmbeddings: Float32Array): void {
    const c = this.e.config;
    const A = this.shape.audioLength;
    if (audioEmbeddings.length !== A * c.hiddenSize)
      throw new RangeError(`audio embeddings hold ${audioEmbeddings.length} floats, expected ${A} x ${c.hiddenSize}`);
  }

  async prefill(audioEmbeddings: Float32Array) {
    const { ctx, config: c, kernels, weights } = this.e;
    const failed = await this.allocation;
    if (failed) throw failed;
    this.checkEmbeddings(audioEmbeddings);
    ctx.check();
    const s = this.shape;
    const r = await runPrefill(
      ctx,
      c,
      kernels,
      weights,
      this.buffers,
      this.prefillBuffers!,
      audioEmbeddings,
      s.request,
      !!s.returnLogits,
    );
    ctx.check();
    const observation = {
      layout: policyLayout(c, s.audioLength, this.buffers.sizes.prompt),
      scores: r.scores,
      keys: r.keys,
    };
    this.prefillToken = r.token;
    return { token: r.token, logits: r.logits, observation };
  }

  /**
   * Head triage of one clip (triage.ts) over this session's prompt, which is the
   * teacher-forced [prefix][audio][instruction][answer without its last token]; the answer
   * rows begin at `first`. The session has nothing to decode afterwards: close it.
   */
  async triage(tk: TriageKernels, audioEmbeddings: Float32Array, answer: number[], first: number): Promise<ClipTriage> {
    const { ctx, config: c, kernels, weights } = this.e;
    const failed = await this.allocation;
    if (failed) throw failed;
    this.checkEmbeddings(audioEmbeddings);
    ctx.check();
    const A = this.shape.audioLength;
    const rows = { first, rows: answer.length, audioStart: audioStart(this.buffers.sizes.prompt), audioLength: A };
    return runTriage(ctx, c, kernels, tk, weights, this.buffers, this.prefillBuffers!, audioEmbeddings, answer, rows);
  }

  async place(plan: PrefillPlan): Promise<WebGpuDecodeSession> {
    const { ctx, config: c, kernels } = this.e;
    const p = this.prefillBuffers!;
    return this.placeWith(plan, (pool, residency, text) =>
      placePlan(ctx, c, kernels, pool, p, this.buffers.sizes.promptLength, residency, plan, text, this.shape.request),
    );
  }

  /**
   * Places `plan` with every kept row read from `rows` instead of a prefill's K/V, no
   * prefill having run (benches of the decode loop at lengths whose prefill a software
   * adapter cannot run); the first `submit` must be given its token.
   */
  async placeUnfilled(plan: PrefillPlan, rows: KvSource): Promise<WebGpuDecodeSession> {
    return this.placeWith(plan, (pool, residency, text) => {
      const { gathers, transfer } = residency.applyPrefill(plan, text, rows);
      writeKeptRows(pool, gathers, rows, this.e.config.headDim);
      pool.flush(residency.pages);
      return transfer;
    });
  }

  private async placeWith(
    plan: PrefillPlan,
    fill: (pool: GpuPool, residency: Residency, text: number[]) => Promise<TransferStats> | TransferStats,
  ): Promise<WebGpuDecodeSession> {
    const { config: c } = this.e;
    const sizes = this.buffers.sizes;
    const A = sizes.audioLength;
    const P = sizes.pageSize;
    const text = textPositions(sizes.prompt, A);
    // The pool holds what this plan keeps (and its recall headroom) and the prompt's text, not
    // the worst case; generated tokens' pages come as they are generated (Residency grows it).
    const need = poolNeed(plan, P, text.length);
    const bytesPerPage = P * slotBytes(c.headDim, this.e.elementBytes);
    checkPoolLimit(need.total * bytesPerPage, this.e.kvMaxBytes, `${A} audio tokens under this plan`);
    // Shards are packed with room for the text cap, so growing never passes a binding.
    const capText = grownTextPages(text.length, this.shape.maxNewTokens, P, 1);
    const layout = poolLayout(c, need.perHead, P, this.e.bindLimit, this.e.elementBytes, capText);
    const { pool, step } = await this.makePool(layout, `the KV pool of this plan (${need.total} pages)`);
    const residency = new Residency(residencyShape(c, layout, sizes.prompt, A, this.e.growth()), pool);
    const transfer = await fill(pool, residency, text);
    return this.startDecode(pool, step, residency, transfer, this.prefillToken);
  }

  async prefillByLayer(
    audioEmbeddings: Float32Array,
    run: LayerPrefill,
  ): Promise<LayeredPrefillResult<WebGpuDecodeSession>> {
    const e = this.e;
    const { ctx, config: c } = e;
    const failed = await this.allocation;
    if (failed) throw failed;
    this.checkEmbeddings(audioEmbeddings);
    ctx.check();
    const p = this.prefillBuffers!;
    const sizes = this.buffers.sizes;
    const req = this.shape.request;
    const placer = new LayerPlacer({
      ctx,
      config: c,
      kernels: e.kernels,
      prefill: p,
      sizes,
      request: req,
      run,
      elementBytes: e.elementBytes,
      limit: e.bindLimit,
      maxBytes: e.kvMaxBytes,
      growth: e.growth(),
      scoped: (make, what, bytes) => e.scoped(make, what, bytes),
    });
    let r: Awaited<ReturnType<typeof runPrefill>>;
    let plan: PrefillPlan;
    let made: { pool: GpuPool; step: DecodeStep };
    try {
      r = await runPrefill(
        ctx,
        c,
        e.kernels,
        e.weights,
        this.buffers,
        p,
        audioEmbeddings,
        req,
        !!this.shape.returnLogits,
        (l) => placer.place(l),
      );
      plan = run.finish();
      const layout = shardedLayout(c, placer.shards, sizes.pageSize, e.bindLimit, e.elementBytes);
      made = await this.makePool(layout, `the KV pool's tables for ${layout.capacityPages} pages`, placer.shardBuffers);
    } catch (err) {
      placer.destroy();
      throw err;
    }
    const residency = placer.residency;
    residency.attach(made.pool);
    made.pool.flush(residency.pages);
    const transfer = { bytesToGpu: 0, bytesToCpu: placer.bytesToCpu, recalledPositions: 0, releasedPositions: 0 };
    const session = this.startDecode(made.pool, made.step, residency, transfer, r.token);
    return { token: r.token, logits: r.logits, plan, session };
  }

  /** The pool of `layout` (with shard buffers made already, or new ones) and the decode step over it. */
  private async makePool(
    layout: PoolLayout,
    what: string,
    shardBuffers?: { k: GPUBuffer; v: GPUBuffer }[],
  ): Promise<{ pool: GpuPool; step: DecodeStep }> {
    const e = this.e;
    const {
      value: [pool, step],
      failure,
    } = e.scoped(
      () => {
        const pool = new GpuPool(e.ctx, e.config, layout, this.buffers.exportIndex, {
          shardBuffers,
          limit: e.bindLimit,
        });
        try {
          return [pool, decodeStep(e, this.shape, this.buffers, pool)] as const;
        } catch (err) {
          pool.destroy();
          throw err;
        }
      },
      what,
      layout.bytes,
    );
    const failed = await failure;
    if (failed) {
      step.destroy();
      pool.destroy();
      throw failed;
    }
    return { pool, step };
  }

  private startDecode(pool: GpuPool, step: DecodeStep, residency: Residency, placed: TransferStats, first: number) {
    // Prefill buffers go as soon as the gather is queued (WebGPU defers the free).
    this.prefillBuffers?.destroy();
    this.prefillBuffers = null;
    this.e.ctx.check();
    this.decode = new WebGpuDecodeSession(
      this.e,
      this.shape,
      this.readouts,
      this.buffers,
      pool,
      step,
      residency,
      placed,
      first,
      () => this.close(),
    );
    return this.decode;
  }

  /** Frees every buffer of the session, whichever stage it is in. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.decode?.release();
    this.prefillBuffers?.destroy();
    this.prefillBuffers = null;
    this.buffers.destroy();
  }
}

/**
 * The rows a placement keeps on the GPU, read from `rows` (no prefill ran: the gathers name
 * the slots and positions, not prefill rows), one write per run of consecutive slots in a page.
 */
function writeKeptRows(pool: GpuPool, gathers: Gather[], rows: KvSource, headDim: number): void {
  const P = pool.layout.pageSize;
  const k = new Float32Array(P * headDim);
  const v = new Float32Array(P * headDim);
  for (const { head, slots, seqPositions } of gathers) {
    for (let j = 0; j < slots.length;) {
      const first = slots[j];
      let n = 0;
      do {
        rows(head, seqPositions[j + n], k, n * headDim, v, n * headDim);
        n++;
      } while (j + n < slots.length && slots[j + n] === first + n && (first + n) % P !== 0);
      pool.writeRows(first, n, k, v);
      j += n;
    }
  }
}

/** The decode step over `pool`, reading back what the session's readouts ask. */
function decodeStep(e: WebGpuEngine, shape: SessionShape, buffers: SessionBuffers, pool: GpuPool): DecodeStep {
  const req = shape.request;
  return new DecodeStep(e, buffers, pool, {
    decodeHeads: req.decodeHeads,
    decodeQueries: !!req.decodeQueries,
    returnLogits: !!shape.returnLogits,
    copyWeights: req.decodeWeights !== false,
    segmentSums: !!req.decodeChunks?.segmentSums,
  });
}

/** What a submitted step knew, for its read: its counters but the waits. */
type Counters = Omit<StepCounters, 'buffers' | 'bindGroups' | 'poolGrowths'>;

export class WebGpuDecodeSession implements DecodeSession {
  private readonly life = new Lifetime('this decode session');
  /** The pool's generation the decode step's bind groups were made for. */
  private stepGeneration: number;
  private nextPos: number;
  private steps = 0;
  private submitted = 0;
  /** Whether the pool stages the step's writes (from the first submit on). */
  private decoding = false;
  /** Rewound since the last submit: a step fed null has no token on the device to take. */
  private rewound = false;
  /** Steps queued for readback, and the step that reads a slot. */
  private readonly ring: StepRing;
  private reader: DecodeStep | null = null;
  /** CPU→GPU bytes written since the last submit (recalled rows), counted with the next step. */
  private pendingBytes = 0;
  /** The pool's growth submits counted up to the last step. */
  private poolSubmits = 0;
  private readonly slots: Int32Array;
  private readonly stepState: Uint32Array<ArrayBuffer>;
  private readonly tokenIn = new Int32Array(1);
  /** The last read step's counters, and whether the CPU waited for it with nothing queued behind. */
  private last: Omit<Counters, 'cpuWaits'> = { dispatches: 0, submits: 0 };
  private lastWaited: number | undefined;

  constructor(
    private readonly e: WebGpuEngine,
    private readonly shape: SessionShape,
    private readonly readouts: CompiledReadouts,
    private readonly buffers: SessionBuffers,
    private readonly pool: GpuPool,
    private step_: DecodeStep,
    private readonly res: Residency,
    readonly placed: TransferStats,
    /** The prefill's greedy token: what a first `submit(null)` feeds. */
    private readonly first: number,
    private readonly closeSession: () => void,
  ) {
    const heads = kvHeadCount(e.config);
    this.slots = new Int32Array(heads);
    this.stepState = new Uint32Array(4 + heads);
    this.nextPos = buffers.sizes.promptLength;
    this.stepGeneration = pool.generation;
    this.ring = new StepRing(buffers.ring, () => buffers.moreReadback());
  }

  /** The session's KV pool: its pages, shards and bytes. */
  poolLayout(): PoolLayout {
    return this.pool.layout;
  }

  async step(token: number): Promise<StepResult> {
    this.submit(token);
    return this.read();
  }

  submit(token: number | null): void {
    this.life.check();
    const { ctx, config: c, kernels } = this.e;
    if (token !== null && !(Number.isInteger(token) && token >= 0 && token < c.vocabSize))
      throw new RangeError(`token ${token} outside vocabulary`);
    if (token === null && this.rewound)
      throw new RangeError('submit(null) right after a rewind: no step left its token; feed one');
    this.rewound = false;
    // The first step fed null takes the prefill's token, which the CPU has read already.
    const fed = token ?? (this.submitted === 0 ? this.first : null);
    ctx.check();
    // Rows recalled from here on, and changed positions and tables, ride in the step's own
    // encoder (step-writes.ts): its buffers are made once the prefill's are gone.
    if (!this.decoding) {
      this.pool.startDecode(kernels.scatterRows, stagingBytes(this.pool.layout.bytes));
      this.decoding = true;
    }
    const slot = this.ring.nextSlot();
    const pos = this.nextPos++;
    const res = this.res;
    const pool = this.pool;
    // The step's append_positions writes these slots' positions: nothing to upload for them.
    res.appendText(pos, this.slots, true);
    let growth: Promise<Error | null> | null = null;
    // The pool grew (this token's text page, or the last plan's recalls): bind its new buffers.
    if (pool.generation !== this.stepGeneration) {
      growth = pool.growthFailure;
      // The old step's uniforms may still be read by a queued step: WebGPU defers their free.
      this.step_.destroy();
      this.step_ = decodeStep(this.e, this.shape, this.buffers, pool);
      this.stepGeneration = pool.generation;
    }
    const step = this.step_;
    const q = ctx.device.queue;
    this.stepState[0] = pos;
    this.stepState.set(this.slots, 4);
    q.writeBuffer(this.buffers.step, 0, this.stepState);
    let bytes = this.stepState.byteLength + this.pendingBytes;
    this.pendingBytes = 0;
    if (fed !== null) {
      this.tokenIn[0] = fed;
      q.writeBuffer(this.buffers.tokenIn, 0, this.tokenIn);
      bytes += 4;
    }
    bytes += pool.flush(res.pages);
    const splits = Math.max(1, Math.ceil(res.pages.longestTable() / kernels.pagesPerSplit));
    let writes = null as EncodedWrites | null;
    q.submit([step.encode(splits, slot, (enc) => (writes = pool.encodeWrites(enc)))]);
    // Before the readback's map: the upload is mapped again no later than the step is read.
    writes?.submitted();
    this.submitted++;
    this.ring.submitted({
      slot,
      growth,
      // A growth of the pool (text pages, recalls) copies it in submits of its own since the last step's.
      counters: {
        dispatches: step.dispatchCount,
        dispatchesPerLayer: step.layerDispatches,
        submits: 1,
        growthSubmits: pool.submits - this.poolSubmits,
        readbackBytes: step.readbackBytes,
        bytesToGpu: bytes,
      },
    });
    this.poolSubmits = pool.submits;
    this.reader = step;
  }

  /** The oldest queued step's token, logits and readouts (maps its readback slot). */
  async read(): Promise<StepResult> {
    this.life.check();
    const ctx = this.e.ctx;
    let read;
    try {
      read = await this.ring.oldest();
    } catch (e) {
      ctx.check(); // a lost device explains a failed map: say so with the typed error
      throw e;
    }
    ctx.check();
    const { slot, counters } = read.step;
    // Every DecodeStep of a session has the same readback layout: the latest reads any slot.
    const r = this.reader!.read(slot.getMappedRange());
    slot.unmap();
    this.last = counters;
    this.lastWaited = read.waited;
    return {
      token: r.token,
      logits: r.logits,
      observation: this.readouts.answer({ step: this.steps++, ...r.observation }),
    };
  }

  get position(): number {
    return this.nextPos;
  }

  async rewind(position: number): Promise<void> {
    this.life.check();
    if (!(Number.isInteger(position) && position <= this.nextPos))
      throw new RangeError(`rewind to position ${position}: the session is at ${this.nextPos}`);
    while (this.ring.queued) {
      const { step } = await this.ring.oldest();
      step.slot.unmap();
    }
    // The emptied slots' positions upload with the next step, as a plan's do.
    this.res.truncateText(position);
    this.nextPos = position;
    this.rewound = true;
  }

  async apply(plan: StepPlan): Promise<TransferStats> {
    this.life.check();
    // Recalled rows are copied into the next step's upload now (step-writes.ts); positions and tables join them at its submit.
    const moved = await this.res.apply(plan);
    this.pendingBytes += moved.bytesToGpu;
    return moved;
  }

  residency(): ResidencyStats {
    this.life.check();
    return this.res.stats();
  }

  /** The live residency (tests compare page tables with the CPU backend's). */
  residencyState(): Residency {
    return this.res;
  }

  counters(): StepCounters {
    const ctx = this.e.ctx;
    return {
      ...this.last,
      ...(this.lastWaited === undefined ? {} : { cpuWaits: this.lastWaited }),
      buffers: ctx.liveBuffers,
      bindGroups: ctx.bindGroupsCreated,
      poolGrowths: this.res.growths,
    };
  }

  close(): void {
    this.closeSession();
  }

  /** Frees the decode's own buffers (the session's close calls it once). */
  release(): void {
    this.life.end('closed');
    this.ring.clear();
    this.step_.destroy();
    this.pool.destroy();
  }
}
