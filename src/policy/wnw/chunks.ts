/**
 * WnW's recallable chunk scheduler, independent of heads: from one step's anchor
 * attention A_τ it decides which segments come back to the GPU (for every tidal head) and
 * which leave. Chunks are `chunkSegments` (2) consecutive segments with a stride of one
 * segment: 4 s chunks, 2 s stride, 50 % overlap at n_s = 2 s.
 *
 * A segment is "recalled" once its CPU complement has been brought back; it is released
 * after `delta` (3) consecutive steps in which no selected chunk covered it. The optional
 * cap keeps the recalled total within a position budget: stale recalled segments (not
 * selected this step, longest unselected first) are released early to make room, and a
 * segment that still does not fit is not recalled this step (it stays selectable).
 */

export interface ChunkOptions {
  chunkSegments: number;
  topChunks: number;
  delta: number;
  /**
   * Segments after the best chosen chunk selected with it, ranked after every chunk's own
   * (0: none, as in the paper). A plan that takes effect two steps late (planLag 2) meets
   * the speech one step further on: the segment it moves into next is already there.
   */
  lead?: number;
}

export const PAPER_CHUNKS: ChunkOptions = { chunkSegments: 2, topChunks: 3, delta: 3 };

export interface ChunkDecision {
  /** Chunks chosen this step, best first. */
  chunks: number[];
  /** Segments newly recalled / released, ascending. */
  recall: number[];
  release: number[];
  /** Selected segments that did not fit under the cap this step. */
  deferred: number[];
}

/** A scheduler's state at one moment (ChunkScheduler.checkpoint). */
export interface ChunkCheckpoint {
  readonly recalled: Uint8Array;
  readonly lastSelected: Int32Array;
  readonly segmentAttention: Float32Array;
  readonly room: number;
}

export class ChunkScheduler {
  readonly segments: number;
  readonly chunks: number;
  /** 1 where a segment's complement is on the GPU (for the tide chart). */
  readonly recalled: Uint8Array;
  private readonly lastSelected: Int32Array;
  /** 1 where a chunk chosen this step covers the segment (reused each step). */
  private readonly selectedNow: Uint8Array;
  /** Anchor attention per segment at the last step (for the tide chart). */
  readonly segmentAttention: Float32Array;

  /**
   * @param cost positions a segment's recall adds over all tidal heads (its complements)
   * @param room positions the recalls may use in total (Infinity: no cap)
   */
  constructor(
    readonly audioLength: number,
    readonly segmentLength: number,
    readonly opts: ChunkOptions,
    private readonly cost: ArrayLike<number>,
    private room = Infinity,
  ) {
    this.segments = Math.ceil(audioLength / segmentLength);
    // Fewer segments than a chunk: one chunk over all of them (none for empty audio).
    this.chunks = this.segments === 0 ? 0 : Math.max(1, this.segments - opts.chunkSegments + 1);
    this.recalled = new Uint8Array(this.segments);
    this.lastSelected = new Int32Array(this.segments).fill(-1);
    this.selectedNow = new Uint8Array(this.segments);
    this.segmentAttention = new Float32Array(this.segments);
  }

  /** What a later `restore` returns the scheduler to: the recalled segments, their last selections and the room left. */
  checkpoint(): ChunkCheckpoint {
    return {
      recalled: this.recalled.slice(),
      lastSelected: this.lastSelected.slice(),
      segmentAttention: this.segmentAttention.slice(),
      room: this.room,
    };
  }

  restore(c: ChunkCheckpoint): void {
    this.recalled.set(c.recalled);
    this.lastSelected.set(c.lastSelected);
    this.segmentAttention.set(c.segmentAttention);
    this.room = c.room;
  }

  /** Chunk scores: mean of A_τ over each chunk's positions. */
  chunkScores(A: ArrayLike<number>): Float64Array {
    const n = this.segmentLength;
    const T = this.audioLength;
    const perSeg = new Float64Array(this.segments);
    for (let p = 0; p < T; p++) perSeg[Math.floor(p / n)] += A[p];
    perSeg.forEach((v, s) => (this.segmentAttention[s] = v));
    const out = new Float64Array(this.chunks);
    for (let c = 0; c < this.chunks; c++) {
      const last = Math.min(this.segments, c + this.opts.chunkSegments);
      let sum = 0;
      for (let s = c; s < last; s++) sum += perSeg[s];
      out[c] = sum / (Math.min(T, last * n) - c * n);
    }
    return out;
  }

  /** One decode step: A is the summed anchor attention over audio positions, step its index. */
  step(A: ArrayLike<number>, step: number): ChunkDecision {
    const score = this.chunkScores(A);
    const order = Array.from(score.keys()).sort((a, b) => score[b] - score[a] || a - b);
    return this.stepChunks(order.slice(0, this.opts.topChunks), step);
  }

  /**
   * One decode step from chunks already chosen (best first): on the device by
   * chunk_select.wgsl, whose ranking is `step`'s (src/reference/chunk-select.ts). The
   * segment sums, where read back, are the tide chart's.
   */
  stepChunks(chosen: ArrayLike<number>, step: number, segmentSums?: ArrayLike<number>): ChunkDecision {
    if (segmentSums) this.segmentAttention.set(segmentSums);
    const chunks = Array.from(chosen);
    const selectedNow = this.selectedNow.fill(0);
    const ranked: number[] = []; // selected segments, best chunk first, then the best chunk's lead
    const select = (from: number, to: number) => {
      for (let s = from; s < Math.min(this.segments, to); s++) {
        if (!selectedNow[s]) ranked.push(s);
        selectedNow[s] = 1;
        this.lastSelected[s] = step;
      }
    };
    const k = this.opts.chunkSegments;
    for (const c of chunks) select(c, c + k);
    if (chunks.length) select(chunks[0] + k, chunks[0] + k + (this.opts.lead ?? 0));
    const release: number[] = [];
    const drop = (s: number) => {
      this.recalled[s] = 0;
      this.room += this.cost[s];
      release.push(s);
    };
    for (let s = 0; s < this.segments; s++) {
      if (this.recalled[s] && !selectedNow[s] && step - this.lastSelected[s] >= this.opts.delta) drop(s);
    }
    const recall: number[] = [];
    const deferred: number[] = [];
    for (const s of ranked) {
      if (this.recalled[s]) continue;
      while (this.cost[s] > this.room) {
        const stale = this.stalest(selectedNow);
        if (stale < 0) break;
        drop(stale);
      }
      if (this.cost[s] > this.room) {
        deferred.push(s);
        continue;
      }
      this.recalled[s] = 1;
      this.room -= this.cost[s];
      recall.push(s);
    }
    const asc = (a: number[]) => a.sort((x, y) => x - y);
    return { chunks, recall: asc(recall), release: asc(release), deferred };
  }

  /** The recalled segment not selected now whose last selection is oldest; -1 if none. */
  private stalest(selectedNow: Uint8Array): number {
    let best = -1;
    for (let s = 0; s < this.segments; s++) {
      if (!this.recalled[s] || selectedNow[s]) continue;
      if (best < 0 || this.lastSelected[s] < this.lastSelected[best]) best = s;
    }
    return best;
  }
}
