/**
 * WnW: waxing-and-waning KV cache (Yao et al. 2026), as this code implements it.
 * Prefill: anchors keep all their audio; every other head keeps its top positions inside
 * every 2 s segment; tidal heads move the rest to CPU memory, fixed heads drop it (with a
 * summary slot per segment under strictBudget). Decode: the anchors' attention picks the top
 * chunks each step; tidal heads recall the segments they lack and release those unselected
 * for δ steps, the plan taking effect one or two steps later (`decideLag`). The open points
 * decided here, the budget, the options, ablations and diagnoses: docs/wnw-method.md.
 */
import { WnwError } from '../../errors.js';
import type {
  AttentionRequest,
  HeadResidency,
  LayerPrefill,
  Move,
  PolicyLayout,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
  SummaryFitting,
} from '../../kv/plan.js';
import { EMPTY_PLAN } from '../../kv/plan.js';
import type { HeadRoles, HeadsFile } from '../../model/heads.js';
import { EVALUATION_OPTIONS, type KvPolicy, type PlanLag, type PolicyOptions } from '../types.js';
import { checkBudget, complement, evaluationOnly, NONE, retainedCount, selectByRetention } from '../select.js';
import { layerwise, prefillAllLayers } from '../layered.js';
import { ChunkScheduler, type ChunkCheckpoint, type ChunkDecision, type ChunkOptions } from './chunks.js';
import { chunkOptionsFor, recallReserve } from './recall.js';
import { recallGroups, shareRoom, type RecallGroup } from './recall-groups.js';
import { segmentSummaries, summarySlots } from './summaries.js';
import { parseWnwOptions, WNW_OPTIONS, type WnwOptions } from './options.js';
import {
  calibrationChangedBy,
  DEFAULT_SEGMENT_FLOOR,
  ownRanking,
  parseWnwAblations,
  WNW_ABLATIONS,
  WNW_DIAGNOSES,
  type WnwAblations,
} from './ablations.js';
import {
  assignRoles,
  budgetKey,
  fitLambda,
  headsScore,
  normalizedScores,
  rankingScore,
  segmentFloor,
  type Roles,
} from './triage.js';

export { DEFAULT_SUMMARY_FIT } from './options.js';

/** The smallest budget planLag 'auto' takes two steps at: chosen on the calibration recordings (decideLag). */
export const TWO_STEP_BUDGET = 0.2;

export interface WnwState {
  roles: Roles;
  retention: number[];
  lambda: number;
  /** Positions per summary slot of the fixed heads in force (0: none; coarser than asked where the budget needed it). */
  summaryLength: number;
  /** r_GPU right after prefill. */
  prefillRGpu: number;
}

export class WnwPolicy implements KvPolicy {
  static readonly needsHeads = true;
  /** The method's options: a transcriber's policyOptions may set these. */
  static readonly options = WNW_OPTIONS;
  /** Ablations and diagnoses: an evaluation's policy spec only (ablations.ts). */
  static readonly evaluationOptions = [...WNW_ABLATIONS, ...WNW_DIAGNOSES];
  readonly name = 'wnw';
  private readonly budget: number;
  private readonly heads: HeadsFile;
  /** The method's options, read and checked (options.ts). */
  private readonly o: WnwOptions;
  /** The ablations and diagnoses an evaluation asked for (ablations.ts); none: the method. */
  private readonly a: WnwAblations;
  private readonly score: number[];
  private readonly calibrated?: HeadRoles;
  private layout?: PolicyLayout;
  private roles!: Roles;
  /** One chunk scheduler per recall group (one group unless anchorScope is 'layer'). */
  private groups: { group: RecallGroup; scheduler: ChunkScheduler }[] = [];
  /** Per tidal head (order of roles.tidal), per segment: its CPU complement. */
  private complements: Int32Array[][] = [];
  private stateInfo?: WnwState;
  /** The last step's scheduler decision (for the tide chart and tests). */
  lastDecision?: ChunkDecision;
  /** The lag decided for the clip of the last `request` (decideLag). */
  private lag?: PlanLag;
  /** Per anchor (order of roles.anchors): its prefill scores, for the recall made before the first step. */
  private anchorPrefill: Float32Array[] = [];
  /** The plan for before the first decode step (afterPrefill), once. */
  private initial: StepPlan = EMPTY_PLAN;
  /** The schedulers as the placement left them (its recall before the first step made): what `restart` returns to. */
  private placed?: { schedulers: ChunkCheckpoint[]; lastDecision?: ChunkDecision };
  /**
   * The observation step the schedulers count from: a session numbers its steps over every
   * request of a recording, the δ of a release counts from the placement's (or restart's) first.
   */
  private stepBase?: number;

  constructor(opts: PolicyOptions) {
    this.budget = checkBudget(this.name, opts.budget);
    if (!opts.heads)
      throw new WnwError('BAD_ARGUMENT', 'policy "wnw" needs the heads file (heads.json, from npm run calibrate)');
    this.heads = opts.heads;
    // The registry refuses these too; a policy made directly must not run an ablation under the method's name.
    const plain = WnwPolicy.evaluationOptions.find((k) => opts[k] !== undefined);
    if (plain !== undefined) throw evaluationOnly(this.name, plain, WNW_OPTIONS);
    this.o = parseWnwOptions(opts);
    this.a = parseWnwAblations(opts[EVALUATION_OPTIONS] ?? {}, this.o, this.heads);
    const roleOpts = this.a.roles;
    const N = this.heads.numLayers * this.heads.numKvHeads;
    const stored = this.heads.roles[budgetKey(this.budget)];
    const ranking = ownRanking(this.a, this.heads);
    this.score =
      ranking === undefined
        ? headsScore(this.heads)
        : rankingScore(this.heads.voiceScore, this.heads.headSensitivity, ranking);
    this.calibrated =
      stored && calibrationChangedBy(stored, this.heads, this.o, this.a) === undefined ? stored : undefined;
    this.roles = this.calibrated
      ? { anchors: [...this.calibrated.anchors], tidal: [...this.calibrated.tidal], fixed: [...this.calibrated.fixed] }
      : assignRoles(this.score, this.budget, roleOpts);
    if (roleOpts.anchors !== undefined && this.roles.anchors.length < roleOpts.anchors) {
      // assignRoles caps anchors at half the budget and half the voice heads: say so rather than run fewer.
      throw new WnwError(
        'BAD_ARGUMENT',
        `policy "wnw": ${roleOpts.anchors} anchors do not fit: at budget ${this.budget} ` +
          `with ${this.roles.anchors.length + this.roles.tidal.length} voice heads ` +
          `at most ${this.roles.anchors.length} can be anchors (half the budget's heads and half the voice heads); ` +
          'ask for fewer anchors, more voice heads (nVoice) or a larger budget',
      );
    }
    if (this.roles.anchors.length + this.roles.tidal.length + this.roles.fixed.length !== N)
      throw new WnwError('BAD_ARGUMENT', 'heads file roles do not cover every head');
    // Anchors keep all their audio whatever the clip's length: a budget below their share fails on every clip, so say so now.
    if (this.o.strict && this.roles.anchors.length > this.budget * N + 1e-9)
      throw this.anchorsOverBudget(this.roles.anchors.length / N);
  }

  /**
   * Steps from the anchors' observation to the recall it asks for (KvPolicy.planLag), for
   * the clip of the last `request`: 1 before any.
   */
  get planLag(): PlanLag {
    return this.lag ?? (this.o.lag === 'auto' ? 1 : this.o.lag);
  }

  request(layout: PolicyLayout): AttentionRequest {
    this.lag = this.decideLag(layout.audioLength, layout.segmentLength);
    // One recall group needs the anchors' chunk choice, not their weights: the device reduces them.
    // Groups per layer (anchorScope 'layer') each sum their own anchors: their weights come back.
    const chunks = this.chunkOptions(layout.audioLength, layout.segmentLength);
    const oneGroup = recallGroups(this.roles, layout.numKvHeads, this.a.anchorScope).length === 1;
    return {
      decodeHeads: [...this.roles.anchors],
      ...(oneGroup
        ? {
            decodeWeights: false,
            decodeChunks: {
              heads: this.roles.anchors.length,
              chunkSegments: chunks.chunkSegments,
              topChunks: chunks.topChunks,
            },
          }
        : {}),
      prefillQueries: Math.max(1, layout.instructionLength),
      // Summary slots fitted to the instruction's queries need them kept through the prefill.
      ...(this.fitting && this.fitting.fit !== 'mean' ? { instructionQueries: true } : {}),
    };
  }

  /** How the placement makes the plan's summary slots: absent without summaries. */
  get fitting(): SummaryFitting | undefined {
    if (!this.o.summaries) return undefined;
    if (this.a.summaryMass === undefined && this.a.summaryMassLayer === undefined) return { fit: this.o.summaryFit };
    const alpha = this.a.summaryMass ?? 1;
    // Per layer, the mass scale an option sets (absent: the whole gap everywhere).
    const mass = Array.from({ length: this.heads.numLayers }, (_, l) =>
      this.a.summaryMassLayer === undefined || l === this.a.summaryMassLayer ? alpha : 0,
    );
    return { fit: this.o.summaryFit, mass };
  }

  /** Roles, retention and λ in use (after prefill). */
  get state(): WnwState | undefined {
    return this.stateInfo;
  }

  /** The first recall group's scheduler (the only one unless anchorScope is 'layer'). */
  get chunkScheduler(): ChunkScheduler | undefined {
    return this.groups[0]?.scheduler;
  }

  get headRoles(): { readonly anchors: readonly number[]; readonly tidal: readonly number[] } {
    return this.roles;
  }

  prefill(obs: PrefillObservation): PrefillPlan {
    return prefillAllLayers(this, obs);
  }

  /**
   * Per layer: retention and roles come from calibration and the clip's length, so a
   * head's selection needs only its own scores; the chunk scheduler's per-segment costs
   * and the budget check read the finished plan.
   */
  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const N = layout.numLayers * layout.numKvHeads;
    if (N !== this.heads.numLayers * this.heads.numKvHeads)
      throw new WnwError(
        'BAD_ARGUMENT',
        `heads file is for ${this.heads.numLayers}×${this.heads.numKvHeads} KV heads, the model has ${layout.numLayers}×${layout.numKvHeads}`,
      );
    this.layout = layout;
    const T = layout.audioLength;
    const n = layout.segmentLength;
    const { retention, lambda, summaryLength } = this.retention(T, n);
    // The anchors alone over the budget: say so before the prefill runs (schedule() checks the whole plan).
    if (this.o.strict && this.roles.anchors.length * T > Math.floor(this.budget * N * T + 1e-9)) {
      throw this.anchorsOverBudget(this.roles.anchors.length / N);
    }
    const isTidal = new Set(this.roles.tidal);
    const isAnchor = new Set(this.roles.anchors);
    const full = this.fullHeads(layout);
    this.anchorPrefill = [];
    const select = (s: Float32Array, h: number): HeadResidency => {
      if (isAnchor.has(h) && this.o.prefillRecall)
        this.anchorPrefill[this.roles.anchors.indexOf(h)] = Float32Array.from(s);
      if (isAnchor.has(h) || full.has(h)) return { gpu: selectByRetention(s, 1, n), cpu: NONE };
      const gpu = selectByRetention(s, retention[h], n, this.o.selection);
      const summarised = summaryLength > 0 && (!isTidal.has(h) || this.a.tidalSummaries);
      if (isTidal.has(h))
        return {
          gpu,
          cpu: complement(gpu, T),
          ...(summarised ? { summaries: segmentSummaries(gpu, T, n, summaryLength) } : {}),
        };
      return summarised
        ? { gpu, cpu: NONE, summaries: segmentSummaries(gpu, T, n, summaryLength) }
        : { gpu, cpu: NONE };
    };
    return layerwise(
      layout,
      (obs) => obs.scores.map((s, k) => select(s, obs.layer * layout.numKvHeads + k)),
      (heads) => this.schedule(heads, retention, lambda, summaryLength),
      this.fitting,
    );
  }

  /** The chunk scheduler over the finished plan: per-segment recall costs and the room left in the budget. */
  private schedule(heads: HeadResidency[], retention: number[], lambda: number, summaryLength: number): void {
    const layout = this.layout!;
    const N = heads.length;
    const T = layout.audioLength;
    const n = layout.segmentLength;
    const cap = Math.floor(this.budget * N * T + 1e-9);
    const segments = Math.ceil(T / n);
    // Per tidal head, per segment: its CPU complement; and per group, what each segment's recall costs.
    this.complements = this.roles.tidal.map((h) => {
      const perSeg: Int32Array[] = [];
      const cpu = heads[h].cpu;
      let i = 0;
      for (let s = 0; s < segments; s++) {
        const j0 = i;
        while (i < cpu.length && cpu[i] < (s + 1) * n) i++;
        perSeg.push(cpu.subarray(j0, i));
      }
      return perSeg;
    });
    const groups = recallGroups(this.roles, layout.numKvHeads, this.a.anchorScope);
    const costs = groups.map((g) => {
      const cost = new Float64Array(segments);
      for (const t of g.tidal) this.complements[t].forEach((c, s) => (cost[s] += c.length));
      return cost;
    });
    // Heads kept whole for a diagnosis are counted at what their retention would keep, so the others' room is unchanged.
    const full = this.fullHeads(layout);
    let used = 0;
    heads.forEach(
      (r, h) =>
        (used +=
          full.has(h) && !this.roles.anchors.includes(h)
            ? retainedCount(T, retention[h], n, this.o.selection)
            : r.gpu.length + (r.summaries?.length ?? 0)),
    );
    const room = this.o.strict ? cap - used : Infinity;
    if (this.o.strict && room < 0) {
      throw this.anchorsOverBudget(used / (N * T));
    }
    const rooms = shareRoom(
      room,
      costs.map((c) => c.reduce((a, b) => a + b, 0)),
    );
    const chunkOpts = this.chunkOptions(T, n);
    this.groups = groups.map((group, i) => ({
      group,
      scheduler: new ChunkScheduler(T, n, chunkOpts, costs[i], rooms[i]),
    }));
    this.stateInfo = { roles: this.roles, retention, lambda, summaryLength, prefillRGpu: used / (N * T || 1) };
    this.lastDecision = undefined;
    // The prompt's last rows asked for the first token: where the anchors looked then is
    // where the first step looks. Recalled now, it is there at step 0, where a plan from
    // step 0's own attention would reach step 1 or 2 (step −1 for δ: released by step 2 unless chosen again).
    this.initial =
      this.o.prefillRecall && this.roles.tidal.length > 0
        ? this.plan((group, scheduler) =>
            scheduler.step(this.anchorSum(group.anchors.map((a) => this.anchorPrefill[a])), -1),
          )
        : EMPTY_PLAN;
    this.placed = { schedulers: this.groups.map((g) => g.scheduler.checkpoint()), lastDecision: this.lastDecision };
    this.stepBase = undefined;
  }

  afterPrefill(): StepPlan {
    const p = this.initial;
    this.initial = EMPTY_PLAN;
    return p;
  }

  /**
   * Back to the schedulers' state before the placement's first decode step, its recall
   * before that step made (the runtime puts the tidal heads' KV back to match): a
   * recording's next request on the same placement decides as its first did.
   */
  restart(): void {
    if (!this.placed) throw new Error('wnw: restart before prefill');
    this.groups.forEach((g, i) => g.scheduler.restore(this.placed!.schedulers[i]));
    this.lastDecision = this.placed.lastDecision;
    this.initial = EMPTY_PLAN;
    this.stepBase = undefined;
  }

  private anchorsOverBudget(rGpu: number): WnwError {
    return new WnwError(
      'BAD_ARGUMENT',
      `policy "wnw": budget ${this.budget} is below what its ${this.roles.anchors.length} anchor heads alone keep ` +
        `(r_GPU ${rGpu.toFixed(3)}); use a larger budget or fewer anchors (option anchors)`,
    );
  }

  /** Positions per summary group: `summaryLength`, within one segment. */
  private groupLength(n: number): number {
    return this.o.summaryLength > 0 ? Math.min(n, Math.round(this.o.summaryLength)) : n;
  }

  /** The heads a diagnosis keeps whole (`fullLayer`, `fullRole`); none by default. */
  private fullHeads(layout: PolicyLayout): Set<number> {
    const { fullLayer, fullRole } = this.a.diagnosis;
    const H = layout.numKvHeads;
    const out = new Set<number>(fullRole === undefined ? [] : this.roles[fullRole === 'anchor' ? 'anchors' : fullRole]);
    if (fullLayer !== undefined) for (let k = 0; k < H; k++) out.add(fullLayer * H + k);
    return out;
  }

  afterStep(obs: StepObservation): StepPlan {
    if (!this.layout || !this.stateInfo) throw new Error('wnw: afterStep before prefill');
    if (!obs.chunks && obs.weights.length !== this.roles.anchors.length)
      throw new Error(
        `wnw: step ${obs.step} exported ${obs.weights.length} heads and no chunks, expected the ${this.roles.anchors.length} anchors`,
      );
    if (this.roles.tidal.length === 0) return EMPTY_PLAN;
    if (obs.chunks && this.groups.length !== 1)
      throw new Error(`wnw: step ${obs.step} brought one chunk choice for ${this.groups.length} recall groups`);
    const step = obs.step - (this.stepBase ??= obs.step);
    // The device's chunk choice (one group: every anchor), or A_τ summed over the group's anchors.
    return this.plan((group, scheduler) =>
      obs.chunks
        ? scheduler.stepChunks(obs.chunks, step, obs.segmentSums)
        : scheduler.step(this.anchorSum(group.anchors.map((a) => obs.weights[a])), step),
    );
  }

  /** Every recall group's decision, as the tidal heads' moves. */
  private plan(decide: (group: RecallGroup, scheduler: ChunkScheduler) => ChunkDecision): StepPlan {
    const recall: Move[] = [];
    const release: Move[] = [];
    this.groups.forEach(({ group, scheduler }, g) => {
      const d = decide(group, scheduler);
      if (g === 0) this.lastDecision = d;
      const moves = (segs: number[], into: Move[]): void => {
        const comps = this.complements;
        if (segs.length === 1) {
          // One segment (most steps'): each head's complement as it is, not a copy.
          for (const t of group.tidal)
            if (comps[t][segs[0]].length) into.push({ head: this.roles.tidal[t], positions: comps[t][segs[0]] });
          return;
        }
        // More: every head's positions in one array, a view of it each.
        let total = 0;
        for (const t of group.tidal) for (const s of segs) total += comps[t][s].length;
        const all = new Int32Array(total);
        let o = 0;
        for (const t of group.tidal) {
          const from = o;
          for (const s of segs) {
            all.set(comps[t][s], o);
            o += comps[t][s].length;
          }
          if (o > from) into.push({ head: this.roles.tidal[t], positions: all.subarray(from, o) });
        }
      };
      moves(d.recall, recall);
      moves(d.release, release);
    });
    if (recall.length === 0 && release.length === 0) return EMPTY_PLAN;
    const byHead = (a: Move, b: Move) => a.head - b.head;
    return { recall: recall.sort(byHead), release: release.sort(byHead) };
  }

  /** Segments selected after the best chosen chunk: `lead`, or what the lag needs (planLag − 1). */
  private get lead(): number {
    return this.o.lead ?? this.planLag - 1;
  }

  /** The chunk scheduler's options for a clip of T positions, with the lead in force. */
  private chunkOptions(T: number, n: number): ChunkOptions {
    return chunkOptionsFor({ ...this.o.recall, lead: this.lead }, T, n);
  }

  /** The recall reserve in segments one selection and its lead name (or `reserveSegments`), within the clip. */
  private fullReserve(T: number, n: number, lead: number): number {
    const c = chunkOptionsFor({ ...this.o.recall, lead }, T, n);
    return Math.min(this.a.reserveSegments ?? c.topChunks * c.chunkSegments + lead, Math.ceil(T / n));
  }

  /**
   * planLag 'auto': a plan two steps late misses the segment the speech has just moved
   * into, which the lead segment recalled after the best chunk makes up for at 0.2 (on the
   * calibration recordings, agreement 0.920 with it against 0.921 at one step and 0.905
   * without) but not at 0.1, where the tidal heads keep 2–5 % of their audio on the GPU
   * and a recall a step late costs the token (−0.014 and −0.046), whether or not the lead
   * fits (docs/wnw-fidelity.md section 8). So: two steps from TWO_STEP_BUDGET up where the
   * budget holds the lead beside the chunks, else the paper's one. Paper mode keeps one
   * step; with no tidal head no plan moves anything.
   */
  private decideLag(T: number, n: number): PlanLag {
    if (this.o.lag !== 'auto') return this.o.lag;
    if (this.roles.tidal.length === 0 || T === 0) return 2;
    if (!this.o.strict || this.budget < TWO_STEP_BUDGET - 1e-9) return 1;
    return this.retention(T, n, this.o.lead ?? 1).whole ? 2 : 1;
  }

  /** A_τ from the anchors' weights (a caller that hands weights, not chunks): each already sums its g query heads. */
  private anchorSum(weights: Float32Array[]): Float64Array {
    const A = new Float64Array(this.layout!.audioLength);
    for (const w of weights) for (let p = 0; p < A.length; p++) A[p] += w[p];
    return A;
  }

  /**
   * Retention for this clip. Strict: re-fit λ on this clip's length so prefill plus the
   * recall reserve is within budget. Otherwise the calibrated retention, re-fitted on
   * this clip without reserve only when no calibrated roles apply (missing budget, or an
   * ablation changes what they were made with: ablations.ts `calibrationChangedBy`).
   */
  private retention(
    T: number,
    n: number,
    lead = this.lead,
  ): { retention: number[]; lambda: number; summaryLength: number; whole: boolean } {
    if (!this.o.strict && this.calibrated) {
      return {
        retention: [...this.calibrated.retention],
        lambda: this.calibrated.lambda,
        summaryLength: this.o.summaries ? this.groupLength(n) : 0,
        whole: true,
      };
    }
    const sNorm = normalizedScores(
      this.score,
      this.roles.anchors,
      this.a.normalize === 'layer' ? this.heads.numKvHeads : undefined,
    ).map((s) => s ** this.a.scorePower);
    const R0 = this.o.strict ? this.fullReserve(T, n, lead) : 0;
    const tidal = this.roles.tidal;
    // The heads that keep summary slots: the fixed ones, and the tidal ones when asked.
    const summarised = this.a.tidalSummaries ? [...this.roles.fixed, ...tidal] : this.roles.fixed;
    const reserve = (R: number, ret: number[], len: number) => recallReserve(tidal, ret, R, len, n, this.o.selection);
    const fit = ([g, R]: [number, number]) =>
      fitLambda(sNorm, this.roles.anchors, [T], this.budget, n, {
        selection: this.o.selection,
        extra: (ret, len) =>
          reserve(R, ret, len) +
          (g > 0 ? summarised.reduce((a, h) => a + summarySlots(len, ret[h], n, this.o.selection, g), 0) : 0),
        floor: segmentFloor(n, this.a.segmentFloor ?? DEFAULT_SEGMENT_FLOOR),
        cap: this.a.maxRetention,
      });
    // Where the budget cannot hold the summaries even at λ = 0, the tidal heads' recall
    // reserve shrinks first (to one segment: a fixed head that sees nothing of a segment
    // costs more than a tidal head recalling fewer at once), then the groups grow (twice
    // the length, up to a segment); failing all, no summaries and the whole reserve.
    const tries: [number, number][] = [];
    const g0 = this.o.summaries ? this.groupLength(n) : 0;
    if (g0 > 0 && this.o.strict) {
      for (let R = R0; R >= Math.min(1, R0); R--) tries.push([g0, R]);
      for (let g = Math.min(n, 2 * g0); g > g0 && tries.length < 64; g = g >= n ? 0 : Math.min(n, 2 * g))
        tries.push([g, Math.min(1, R0)]);
    }
    tries.push([this.o.strict ? 0 : g0, R0]);
    for (const t of tries) {
      const f = fit(t);
      const fits = f.rGpu <= this.budget + 1e-12;
      // whole: the budget holds the whole reserve beside the summary slots asked for (the segment floor may still give way).
      if (fits || t === tries[tries.length - 1])
        return { retention: f.retention, lambda: f.lambda, summaryLength: t[0], whole: fits && t === tries[0] };
    }
    throw new Error('unreachable');
  }
}
