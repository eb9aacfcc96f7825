/**
 * Residency: which position of which KV head sits in which pool slot, and which
 * positions have a CPU copy. It turns policy plans (positions) into pool operations
 * (pages, slots) and keeps the accounting the policies and reports read. It is shared
 * by both backends; they only move the bytes (PageStorage).
 *
 * Audio and text live in separate pages of the same per-head table: text pages are
 * appended densely and released only when the text is rewound (`truncateText`); audio pages are packed densely at prefill, and
 * a recall fills the holes that releases left in the head's audio pages before it takes
 * fresh pages.
 *
 * Text KV is taken on demand: a generated token's page comes from its shard's free list
 * (pages that releases freed included), and a shard out of pages grows by `growPages`
 * per head (storage that cannot grow in place copies into a larger buffer), so no page
 * is held for text that is never generated. Growth runs before a step's or a plan's
 * allocations, never inside one, since it moves the shards' page ids.
 */
import { PageAllocator, type PoolShard } from './page-allocator.js';
import { growthFor } from './growth.js';
import { EMPTY, PageSlots } from './page-slots.js';
import { OffloadStore } from './offload.js';
import { slotBytes } from './precision.js';
import { summarise, summaryEntry, type SummaryFit } from './summary.js';
import { checkPositions, checkSummaries } from './plan-checks.js';
import { RecallableSummaries } from './recallable-summaries.js';
import type { ResidencyStats, TransferStats } from './types.js';
import type { PageStorage, KvSource, SummaryPlacement, Gather } from './storage.js';
import type { HeadResidency, Move, PrefillPlan, StepPlan } from './plan.js';

export { EMPTY };

export type { PageStorage, KvSource, SummaryPlacement, Gather } from './storage.js';

export interface ResidencyShape {
  heads: number;
  headDim: number;
  pageSize: number;
  numPages: number;
  /** The pool's shards (see PageAllocator); default one for all heads. */
  shards?: PoolShard[];
  /** Bytes of one stored key or value element in the pool (kv/precision.ts); default 4 (f32). */
  kvElementBytes?: number;
  audioStart: number;
  audioLength: number;
  /** Pages per head a shard adds when it runs out (text on demand); 0 (default): the pool never grows. */
  growPages?: number;
  /** The most pages the pool may grow to (the byte cap kvMaxBytes, in pages); default unbounded. */
  maxPages?: number;
}

export class Residency {
  readonly pages: PageAllocator;
  readonly offload: OffloadStore;
  /** Pages, their slots and what each slot holds (kv/page-slots.ts). */
  private readonly slots: PageSlots;
  /**
   * Per head, per audio offset: its slot counted from the head's shard's first slot, or
   * EMPTY. Shard-relative, so a growth that moves a shard's pages leaves them as they are.
   */
  private readonly audioSlot: Int32Array[];
  private readonly gpuCount: Int32Array;
  /** Per head: positions with a CPU copy, and GPU positions without one (so stats are O(heads)). */
  private readonly cpuCount: Int32Array;
  private readonly gpuOnly: Int32Array;
  private readonly rowK: Float32Array;
  private readonly rowV: Float32Array;
  /** Bytes of one position's key and value in the pool (what a recall moves to the GPU). */
  private readonly rowBytes: number;
  /** Summary slots over CPU-backed groups, silenced while any of their group is recalled. */
  private readonly recallable: RecallableSummaries;
  /** Times the pool grew (a backend rebuilds what binds the pool's buffers). */
  growths = 0;
  /** A release's slots (reused each plan). */
  private freed = new Int32Array(0);
  /** A recall's positions not yet on the GPU, and the slots they take (reused each plan). */
  private todo = new Int32Array(0);
  private recallSlots = new Int32Array(0);
  /** Per head, the positions a plan recalls that are not on the GPU (reused). */
  private readonly headRows: Int32Array;
  /** Per shard, the pages a step's append or a plan's recalls may take (reused). */
  private shardPages = new Int32Array(0);

  /**
   * `shards: []` with `numPages: 0` starts without pages: a per-layer prefill adds each
   * layer's shard (addShard) and places its heads (applyPrefillHeads) as layers complete.
   */
  constructor(
    readonly shape: ResidencyShape,
    private storage: PageStorage,
  ) {
    const { heads, headDim, pageSize, numPages, audioLength, shards } = shape;
    this.rowBytes = 2 * headDim * (shape.kvElementBytes ?? 4);
    this.pages = new PageAllocator({
      heads,
      pageSize,
      numPages,
      bytesPerPage: pageSize * slotBytes(headDim, shape.kvElementBytes ?? 4),
      shards,
    });
    this.offload = new OffloadStore(headDim, audioLength, undefined, shape.kvElementBytes ?? 4);
    this.slots = new PageSlots(this.pages, heads);
    this.audioSlot = Array.from({ length: heads }, () => new Int32Array(audioLength).fill(EMPTY));
    this.gpuCount = new Int32Array(heads);
    this.headRows = new Int32Array(heads);
    this.cpuCount = new Int32Array(heads);
    this.gpuOnly = new Int32Array(heads);
    this.rowK = new Float32Array(pageSize * headDim);
    this.rowV = new Float32Array(pageSize * headDim);
    this.recallable = new RecallableSummaries(heads, audioLength);
  }

  get pageSize(): number {
    return this.shape.pageSize;
  }

  /** Sequence position held by every pool slot (EMPTY when unused): the attention kernels' view. Replaced when the pool grows. */
  get positions(): Int32Array {
    return this.slots.positions;
  }

  /** Pool slot of an audio position of a head, or EMPTY. */
  slotOf(head: number, audioPos: number): number {
    const s = this.audioSlot[head][audioPos];
    return s === EMPTY ? EMPTY : s + this.firstSlot(head);
  }

  /** Sorted audio offsets of a head currently on the GPU. */
  gpuPositions(head: number): Int32Array {
    const s = this.audioSlot[head];
    const out: number[] = [];
    for (let i = 0; i < s.length; i++) if (s[i] !== EMPTY) out.push(i);
    return Int32Array.from(out);
  }

  /**
   * Places the prefill KV as the plan says. Text positions (`textSeqPositions`) are
   * kept on the GPU for every head. CPU copies are read through `source` now; the
   * returned gathers say which prefill rows the backend must copy into which slots.
   */
  applyPrefill(
    plan: PrefillPlan,
    textSeqPositions: number[],
    source: KvSource,
    summaries?: SummaryPlacement,
  ): { gathers: Gather[]; transfer: TransferStats } {
    if (plan.heads.length !== this.shape.heads)
      throw new Error(`prefill plan has ${plan.heads.length} heads, expected ${this.shape.heads}`);
    const r = this.applyPrefillHeads(0, plan.heads, textSeqPositions, source, summaries);
    this.storage.syncPositions(0, this.positions.length, this.positions);
    return r;
  }

  /**
   * A shard of `pages` fresh pages for heads [firstHead, firstHead + heads), after
   * every existing page (a per-layer prefill: the layer's plan has just said how many).
   */
  addShard(firstHead: number, heads: number, pages: number): PoolShard {
    return this.slots.addShard(firstHead, heads, pages);
  }

  /** Hands the storage over (a per-layer prefill places rows before the pool's own buffers exist) and syncs every position. */
  attach(storage: PageStorage): void {
    this.storage = storage;
    storage.syncPositions(0, this.positions.length, this.positions);
  }

  /**
   * Places the heads [firstHead, firstHead + plans.length) as `applyPrefill` does, without
   * syncing positions (the caller syncs, or attaches the storage, once all are placed).
   */
  applyPrefillHeads(
    firstHead: number,
    plans: HeadResidency[],
    textSeqPositions: number[],
    source: KvSource,
    summaries?: SummaryPlacement,
  ): { gathers: Gather[]; transfer: TransferStats } {
    const { heads, audioStart, audioLength } = this.shape;
    if (firstHead < 0 || firstHead + plans.length > heads)
      throw new Error(`prefill plan for heads ${firstHead}..${firstHead + plans.length - 1}, the pool has ${heads}`);
    const gathers: Gather[] = [];
    let bytesToCpu = 0;
    for (let i = 0; i < plans.length; i++) {
      const h = firstHead + i;
      const { gpu, cpu } = plans[i];
      const groups = plans[i].summaries ?? [];
      checkPositions(gpu, audioLength, `head ${h} gpu`);
      checkPositions(cpu, audioLength, `head ${h} cpu`);
      const recallable = groups.length ? checkSummaries(groups, gpu, cpu, audioLength, h) : [];
      const slots: number[] = [];
      const seq: number[] = [];
      for (const pos of textSeqPositions) {
        slots.push(this.slots.allocText(h));
        seq.push(pos);
      }
      const audioSlots = this.slots.allocDense(h, gpu.length + groups.length);
      for (let j = 0; j < gpu.length; j++) {
        this.bind(h, gpu[j], audioSlots[j]);
        slots.push(audioSlots[j]);
        seq.push(audioStart + gpu[j]);
      }
      for (let j = 0; j < slots.length; j++) this.positions[slots[j]] = seq[j];
      const queries = groups.length && summaries && summaries.fit !== 'mean' ? summaries.queries(h) : undefined;
      groups.forEach((group, j) => {
        const slot = audioSlots[gpu.length + j];
        this.placeSummary(h, slot, group, source, summaries?.fit, queries, summaries?.massScale?.(h));
        if (recallable[j]) this.recallable.add(h, group, slot, this.positions[slot]);
      });
      gathers.push({ head: h, slots: Int32Array.from(slots), seqPositions: Int32Array.from(seq) });
      for (const pos of cpu) {
        source(h, audioStart + pos, this.rowK, 0, this.rowV, 0);
        this.offload.put(h, pos, this.rowK, 0, this.rowV, 0);
        bytesToCpu += this.rowBytes;
      }
      this.cpuCount[h] = cpu.length;
      let gpuOnly = groups.length;
      for (const pos of gpu) if (!this.offload.has(h, pos)) gpuOnly++;
      this.gpuOnly[h] = gpuOnly;
    }
    return { gathers, transfer: { bytesToGpu: 0, bytesToCpu, recalledPositions: 0, releasedPositions: 0 } };
  }

  /**
   * One summary slot (kv/summary.ts): the group's mean key and value, or fitted to the
   * queries, written now, with the count in its position entry. It is a GPU slot of the
   * head's audio, so r_GPU counts it.
   */
  private placeSummary(
    head: number,
    slot: number,
    group: Int32Array,
    source: KvSource,
    fit?: SummaryFit,
    queries?: Float32Array,
    massScale?: number,
  ): void {
    const hd = this.shape.headDim;
    const k = new Float32Array(group.length * hd);
    const v = new Float32Array(group.length * hd);
    group.forEach((pos, i) => source(head, this.shape.audioStart + pos, k, i * hd, v, i * hd));
    const s = summarise(k, v, group.length, hd, fit, queries, massScale);
    this.storage.writeRows(slot, 1, s.key, s.value);
    this.positions[slot] = summaryEntry(s.count);
    this.gpuCount[head]++;
  }

  /**
   * Reserves the slot for a generated token at `seqPos` in every head; returns slot per head.
   * `placed`: the storage's decode step writes these slots' positions itself (the WebGPU
   * step's append_positions), so they are not synced.
   */
  appendText(seqPos: number, out: Int32Array, placed = false): Int32Array {
    if (this.shape.growPages) {
      // Shards are added during a layered prefill, never during decode: sized once a session.
      if (this.shardPages.length !== this.pages.shards.length) this.shardPages = new Int32Array(this.pages.shards.length);
      const need = this.shardPages.fill(0);
      for (let h = 0; h < this.shape.heads; h++) if (this.slots.needsTextPage(h)) need[this.pages.shardIndexOf(h)]++;
      this.reserve(need);
    }
    for (let h = 0; h < this.shape.heads; h++) {
      const slot = this.slots.allocText(h);
      this.positions[slot] = seqPos;
      out[h] = slot;
      if (!placed) this.storage.syncPositions(slot, 1, this.positions);
    }
    return out;
  }

  /**
   * Forgets every head's text from sequence position `fromSeqPos` on (a next request of
   * the same recording forks there): its slots empty, its pages back to the pool. The
   * audio and what the policy placed of it stay as they are.
   */
  truncateText(fromSeqPos: number): void {
    const audioEnd = this.shape.audioStart + this.shape.audioLength;
    if (fromSeqPos < audioEnd)
      throw new RangeError(
        `text rewound to position ${fromSeqPos}, inside the prompt's audio (it ends at ${audioEnd})`,
      );
    for (let h = 0; h < this.shape.heads; h++)
      for (const slot of this.slots.truncateText(h, fromSeqPos)) this.storage.syncPositions(slot, 1, this.positions);
  }

  /** Applies releases first (they free pages), then recalls from the CPU store. */
  apply(plan: StepPlan): TransferStats {
    let released = 0;
    let recalled = 0;
    for (const { head, positions } of plan.release) released += this.release(head, positions);
    if (this.shape.growPages && plan.recall.length) this.reserveForRecall(plan.recall);
    for (const { head, positions } of plan.recall) recalled += this.recall(head, positions);
    return {
      bytesToGpu: recalled * this.rowBytes,
      bytesToCpu: 0,
      recalledPositions: recalled,
      releasedPositions: released,
    };
  }

  /** The head's `positions` leave the GPU; returns how many were there. */
  private release(head: number, positions: Int32Array): number {
    const first = this.firstSlot(head);
    const at = this.audioSlot[head];
    if (this.freed.length < positions.length) this.freed = new Int32Array(positions.length);
    const freed = this.freed;
    const summaries = this.recallable.any(head);
    let n = 0;
    for (let i = 0; i < positions.length; i++) {
      const pos = positions[i];
      if (at[pos] === EMPTY) continue;
      freed[n++] = at[pos] + first;
      at[pos] = EMPTY;
      // Dropped for good where it had no CPU copy (a head with none on the GPU only looks at none).
      if (this.gpuOnly[head] > 0 && !this.offload.has(head, pos)) this.gpuOnly[head]--;
      if (!summaries) continue;
      const g = this.recallable.released(head, pos);
      if (g) this.setEntry(g.slot, g.entry);
    }
    this.gpuCount[head] -= n;
    this.slots.free(head, freed, n);
    // A segment's slots are runs within pages: each run's positions marked once.
    for (let i = 0; i < n;) {
      let j = i + 1;
      while (j < n && freed[j] === freed[j - 1] + 1) j++;
      this.storage.syncPositions(freed[i], j - i, this.positions);
      i = j;
    }
    return n;
  }

  /**
   * Grows the shards the recalls' fresh pages would not fit in. Most steps' recalls fit
   * even if each took fresh pages only (releases free as many): then nothing is counted.
   */
  private reserveForRecall(recall: readonly Move[]): void {
    const P = this.pageSize;
    const shards = this.pages.shards.length;
    if (this.shardPages.length !== shards) this.shardPages = new Int32Array(shards);
    const most = this.shardPages.fill(0);
    for (const { head, positions } of recall) most[this.pages.shardIndexOf(head)] += Math.ceil(positions.length / P);
    let fits = true;
    for (let s = 0; s < shards; s++) if (most[s] > this.pages.freeIn(s)) fits = false;
    if (fits) return;
    // The fresh pages allocAudio will take: rows past the holes of the head's audio pages.
    const rows = this.headRows.fill(0);
    for (const { head, positions } of recall) {
      const at = this.audioSlot[head];
      for (let i = 0; i < positions.length; i++) if (at[positions[i]] === EMPTY) rows[head]++;
    }
    const need = most.fill(0);
    for (let h = 0; h < rows.length; h++)
      if (rows[h]) need[this.pages.shardIndexOf(h)] += Math.ceil(Math.max(0, rows[h] - this.slots.usableHoles(h)) / P);
    this.reserve(need);
  }

  /** The head's `positions` come back from the CPU store; returns how many were not on the GPU. */
  private recall(head: number, positions: Int32Array): number {
    if (this.todo.length < positions.length) {
      this.todo = new Int32Array(positions.length);
      this.recallSlots = new Int32Array(positions.length);
    }
    const todo = this.todo;
    const at = this.audioSlot[head];
    let n = 0;
    for (let i = 0; i < positions.length; i++) {
      const pos = positions[i];
      if (at[pos] !== EMPTY) continue;
      if (!this.offload.has(head, pos))
        throw new Error(`recall of head ${head} position ${pos}, which has no CPU copy`);
      todo[n++] = pos;
    }
    const slots = this.recallSlots;
    this.slots.allocAudio(head, n, slots);
    const first = this.firstSlot(head);
    const P = this.pageSize;
    const seq = this.positions;
    const audioStart = this.shape.audioStart;
    this.gpuCount[head] += n;
    // Slots from allocAudio are runs within pages; within one, rows that follow each other
    // in the store go up as one run of it: a copy per run, not per position.
    for (let i = 0; i < n;) {
      let j = i;
      while (j + 1 < n && slots[j + 1] === slots[j] + 1 && slots[j + 1] % P !== 0) j++;
      const count = j - i + 1;
      for (let r = 0; r < count;) {
        const rows = this.offload.runLength(head, todo, i + r, count - r);
        this.writeStored(head, todo, i + r, rows, slots[i + r]);
        r += rows;
      }
      for (let r = i; r <= j; r++) {
        at[todo[r]] = slots[r] - first;
        seq[slots[r]] = audioStart + todo[r];
      }
      this.storage.syncPositions(slots[i], count, seq);
      i = j + 1;
    }
    if (this.recallable.any(head))
      for (let i = 0; i < n; i++) {
        const silenced = this.recallable.recalled(head, todo[i]);
        if (silenced !== undefined) this.setEntry(silenced, EMPTY);
      }
    return n;
  }

  /** The rows of `positions[from..from + n)`, which follow each other in the store, into the slots from `slot` on. */
  private writeStored(head: number, positions: Int32Array, from: number, n: number, slot: number): void {
    const run = this.offload.run(head, positions[from], n);
    if (this.storage.writeStoredRows) return this.storage.writeStoredRows(slot, n, run);
    // f32 rows are what writeRows takes: the run's own floats, one write as for a pool that stages them.
    if (this.offload.elementBytes === 4) {
      const { bytes, length } = run;
      const k = new Float32Array(bytes.buffer, bytes.byteOffset + run.k, length / 4);
      return this.storage.writeRows(slot, n, k, new Float32Array(bytes.buffer, bytes.byteOffset + run.v, length / 4));
    }
    const hd = this.shape.headDim;
    for (let r = 0; r < n; r++) this.offload.get(head, positions[from + r], this.rowK, r * hd, this.rowV, r * hd);
    this.storage.writeRows(slot, n, this.rowK.subarray(0, n * hd), this.rowV.subarray(0, n * hd));
  }

  private setEntry(slot: number, entry: number): void {
    this.positions[slot] = entry;
    this.storage.syncPositions(slot, 1, this.positions);
  }

  stats(): ResidencyStats {
    const { heads, audioLength } = this.shape;
    const gpuOrCpu = new Int32Array(heads);
    for (let h = 0; h < heads; h++) gpuOrCpu[h] = this.cpuCount[h] + this.gpuOnly[h];
    const total = heads * audioLength || 1;
    const sum = (a: Int32Array) => a.reduce((x, y) => x + y, 0);
    return {
      gpuPerHead: Int32Array.from(this.gpuCount),
      gpuOrCpuPerHead: gpuOrCpu,
      rGpu: sum(this.gpuCount) / total,
      rGpuCpu: sum(gpuOrCpu) / total,
      gpuBytesInUse: this.pages.usedPages * this.pages.bytesPerPage,
      gpuBytesCapacity: this.pages.capacity * this.pages.bytesPerPage,
      textPages: this.slots.textPages,
      cpuBytes: this.offload.bytes,
    };
  }

  /** Slots per head (pages of the head's table), for kernels and tests. */
  pageTable(head: number): readonly number[] {
    return this.pages.pageTable(head);
  }

  /** The pool-wide slot a head's shard starts at. */
  private firstSlot(head: number): number {
    return this.pages.shards[this.pages.shardIndexOf(head)].firstPage * this.pageSize;
  }

  private bind(head: number, pos: number, slot: number): void {
    this.audioSlot[head][pos] = slot - this.firstSlot(head);
    this.gpuCount[head]++;
  }

  /** Grows the shards with fewer free pages than `need[s]` (kv/growth.ts growthFor). */
  private reserve(need: Int32Array): void {
    // Storage that cannot grow leaves allocPage to report the full pool.
    const add = this.storage.grow ? growthFor(this.pages, need, this.shape.growPages ?? 0, this.shape.maxPages) : null;
    if (add) this.grow(add);
  }

  /** Grows the pool by `add[s]` pages in shard s and moves the slots this residency holds pool-wide to the shards' new page ids. */
  private grow(add: Int32Array): void {
    const { before, shiftOf } = this.slots.grow(add);
    for (let h = 0; h < this.shape.heads; h++) {
      const d = shiftOf(h);
      if (d) this.recallable.shift(h, d);
    }
    if (!this.storage.grow!(before, this.pages.shards))
      this.storage.syncPositions(0, this.positions.length, this.positions);
    this.growths++;
  }
}
