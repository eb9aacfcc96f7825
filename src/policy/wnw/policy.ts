/**
 * WnW: waxing-and-waning KV cache (Yao et al. 2026).
 *
 * Prefill: anchors keep all their audio; every other head keeps, inside every 2 s
 * segment, its top ⌊retention · n_s⌋ positions by text-to-audio attention (the prompt's
 * instruction rows, the g query heads combined by sum — the observation's convention).
 * Tidal heads move the rest to the CPU (recallable); fixed heads drop it.
 * Decode: after each step, A_τ = Σ of the anchor query heads' softmax weights (reset each
 * step); the chunk scheduler (chunks.ts) picks the top chunks and every tidal head
 * recalls the selected segments it lacks and releases those unselected for δ = 3 steps.
 * The plan takes effect at the next step (one-step lag). The paper's chunks are three of
 * 4 s; under strictBudget they are 2 s and their number grows with the clip (recall.ts).
 *
 * Open points, decided here:
 * - Recall brings only a segment's CPU complement (its prefill-selected positions never
 *   left), and release drops only what was recalled: a tidal head never falls below its
 *   prefill selection, and no position is moved twice.
 * - Budget (`strictBudget`, default true): r_GPU stays ≤ the target at every step. At
 *   prefill λ is re-fitted for this clip so that prefill plus a recall reserve fits —
 *   the reserve is the complement of `reserveSegments` (default topChunks · chunkSegments
 *   for the clip, what one selection can name) full segments per tidal head — and the scheduler's cap
 *   releases stale recalled segments early when a recall would exceed the budget. With
 *   `strictBudget: false` the calibrated retention is used as is and recalls are not
 *   capped, as in the paper (whose measured r_GPU was 22.3 % at a 0.2 target).
 * - Segment floor (`segmentFloor`, default 1 position): every non-anchor head keeps at
 *   least that many positions per segment, or as many as the budget holds, so
 *   ⌊retention · n_s⌋ cannot round a low-scored head down to no audio at all (triage.ts
 *   `segmentFloor`, `fitLambda`); 0 is the formula as written.
 * - Summaries (`summaries`, default true under strictBudget): a fixed head keeps, per segment, one summary
 *   slot for what it drops — the mean key and value, attended with a ln(count) bias
 *   (kv/summary.ts, summaries.ts) — so the softmax still sees the dropped mass instead
 *   of handing it to the few positions kept, which is what pulled the model to stop early.
 *   They are paid for out of the budget; where it cannot hold them, the tidal heads'
 *   recall reserve shrinks first (to one segment), then the groups coarsen
 *   (`summaryLength` finer than a segment), and failing all there are none.
 *   `summaryFit` says how a slot is made from its group: the plain mean ('mean'), or
 *   fitted to the instruction's queries, the same rows the prefill scores come from —
 *   the value weighted as those queries weigh the rows ('value'), and the count raised
 *   to the mass they gave the group ('mass'), which the mean key under-counts;
 *   `summaryMass` scales the exponent δ of that correction (0 is 'value', 1 the whole gap),
 *   and `summaryMassLayer` applies it in one layer only (the one the stop token reads),
 *   the others' slots as 'value'.
 * - Normalisation of the ranking score (`normalize`): over all heads (default) or per
 *   layer. Diagnosis only: `fullLayer` / `fullRole` keep one layer's or one role's heads
 *   whole, outside the budget (docs/wnw-fidelity.md).
 */
import { WnwError } from '../../errors.js';
import type { AttentionRequest, HeadResidency, LayerPrefill, Move, PolicyLayout, PrefillObservation, PrefillPlan, StepObservation, StepPlan } from '../../kv/plan.js';
import { EMPTY_PLAN } from '../../kv/plan.js';
import type { SummaryFit } from '../../kv/summary.js';
import type { HeadRoles, HeadsFile } from '../../model/heads.js';
import type { KvPolicy, PlanLag, PolicyOptions } from '../types.js';
import { checkBudget, complement, concatSorted, NONE, numOpt, retainedCount, selectByRetention } from '../select.js';
import { layerwise, prefillAllLayers } from '../layered.js';
import { ChunkScheduler, type ChunkDecision } from './chunks.js';
import { chunkOptionsFor, recallOptions, recallReserve, type RecallOptions } from './recall.js';
import { recallGroups, shareRoom, type AnchorScope, type RecallGroup } from './recall-groups.js';
import { segmentSummaries, summarySlots } from './summaries.js';
import { assignRoles, budgetKey, fitLambda, headsScore, normalizedScores, rankingScore, segmentFloor, type Roles, type Selection } from './triage.js';

/** Summary slots fitted to the instruction's queries: chosen on the calibration recordings (docs/wnw-fidelity.md). */
export const DEFAULT_SUMMARY_FIT: SummaryFit = 'mass';

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
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly needsHeads = true;
  static readonly options: readonly string[] = ['chunkSegments', 'topChunks', 'recallEvery', 'delta', 'selection', 'strictBudget', 'reserveSegments', 'ranking', 'nVoice', 'anchors', 'segmentFloor', 'summaries', 'summaryLength', 'summaryFit', 'summaryMass', 'summaryMassLayer', 'tidalSummaries', 'anchorScope', 'normalize', 'fullLayer', 'fullRole', 'planLag'];
  readonly name = 'wnw';
  private readonly budget: number;
  private readonly heads: HeadsFile;
  /** Chunk length, top-k (a number, or scaled with the clip) and δ (recall.ts). */
  private readonly recall: RecallOptions;
  private readonly selection: Selection;
  private readonly strict: boolean;
  /** Recall reserve in segments, where an option sets it (else what one selection names). */
  private readonly reserveOpt?: number;
  /** Positions per segment every non-anchor head keeps at least (triage.ts `segmentFloor`). */
  private readonly floorPositions: number;
  /** Fixed heads keep one summary slot per segment for the positions they drop (kv/summary.ts). */
  private readonly summaries: boolean;
  /** Where s̃ is normalised: over all heads ('global', the method's max) or within each layer ('layer'). */
  private readonly normalize: 'global' | 'layer';
  /** Tidal heads also keep a summary slot per group of what they hold in CPU memory, silenced while it is recalled. */
  private readonly tidalSummaries: boolean;
  /** Positions a summary slot stands for at most (0: a whole segment). */
  private readonly summaryLength: number;
  /** How a summary slot is made (kv/summary.ts): plain mean, or fitted to the instruction's queries. */
  private readonly summaryFit: SummaryFit;
  /** Under 'mass', the scale of δ in a slot's count (1: the whole gap; 0: as 'value'). */
  private readonly summaryMass?: number;
  /** Under 'mass', the one layer whose slots get the correction; the others' are as 'value'. */
  private readonly summaryMassLayer?: number;
  private readonly score: number[];
  /** Diagnosis only: a layer (`fullLayer`) or a role (`fullRole`) whose heads keep all their audio, outside the budget. */
  private readonly fullLayer?: number;
  private readonly fullRole?: 'anchor' | 'tidal' | 'fixed';
  private readonly calibrated?: HeadRoles;
  /** Whose attention directs a tidal head's recall: every anchor's, or its own layer's where it has any (recall-groups.ts). */
  private readonly anchorScope: AnchorScope;
  private layout?: PolicyLayout;
  private roles!: Roles;
  /** One chunk scheduler per recall group (one group unless anchorScope is 'layer'). */
  private groups: { group: RecallGroup; scheduler: ChunkScheduler }[] = [];
  /** Per tidal head (order of roles.tidal), per segment: its CPU complement. */
  private complements: Int32Array[][] = [];
  private stateInfo?: WnwState;
  /** The last step's scheduler decision (for the tide chart and tests). */
  lastDecision?: ChunkDecision;
  /**
   * 1 (default): the plan from step t's anchors applies at step t + 1, as in the paper.
   * 2: at step t + 2, so the runtime need not wait for step t's readback before queuing
   * t + 1; an option until the eval shows it changes nothing (README, "Decode pipeline").
   */
  readonly planLag: PlanLag;

  constructor(opts: PolicyOptions) {
    this.budget = checkBudget(this.name, opts.budget);
    if (!opts.heads) throw new WnwError('BAD_ARGUMENT', 'policy "wnw" needs the heads file (heads.json, from npm run calibrate)');
    this.heads = opts.heads;
    const sel = opts['selection'] ?? 'segment';
    if (sel !== 'segment' && sel !== 'global') throw new WnwError('BAD_ARGUMENT', `option "selection" must be "segment" or "global", got ${String(sel)}`);
    this.selection = sel;
    this.strict = opts['strictBudget'] !== false;
    const lag = opts['planLag'] ?? 1;
    if (lag !== 1 && lag !== 2) throw new WnwError('BAD_ARGUMENT', `option "planLag" must be 1 or 2, got ${String(lag)}`);
    this.planLag = lag;
    this.recall = recallOptions(opts, this.strict);
    this.reserveOpt = opts['reserveSegments'] === undefined ? undefined : numOpt(opts, 'reserveSegments', 0, 0);
    this.floorPositions = numOpt(opts, 'segmentFloor', 1, 0);
    // Paper mode (strictBudget false) runs the method as written: summaries only when asked.
    const summaries = opts['summaries'] ?? this.strict;
    if (typeof summaries !== 'boolean') throw new WnwError('BAD_ARGUMENT', `option "summaries" must be true or false, got ${String(summaries)}`);
    this.summaries = summaries;
    this.summaryLength = numOpt(opts, 'summaryLength', 0, 0);
    const tidalSummaries = opts['tidalSummaries'] ?? false;
    if (typeof tidalSummaries !== 'boolean') throw new WnwError('BAD_ARGUMENT', `option "tidalSummaries" must be true or false, got ${String(tidalSummaries)}`);
    if (tidalSummaries && !summaries) throw new WnwError('BAD_ARGUMENT', 'option "tidalSummaries" needs summaries (summaries=true)');
    this.tidalSummaries = tidalSummaries;
    const fit = opts['summaryFit'] ?? DEFAULT_SUMMARY_FIT;
    if (fit !== 'mean' && fit !== 'value' && fit !== 'mass') throw new WnwError('BAD_ARGUMENT', `option "summaryFit" must be "mean", "value" or "mass", got ${String(fit)}`);
    this.summaryFit = fit;
    for (const key of ['summaryMass', 'summaryMassLayer']) {
      if (opts[key] !== undefined && fit !== 'mass') throw new WnwError('BAD_ARGUMENT', `option "${key}" shapes the count of summaryFit "mass", not "${fit}"`);
    }
    if (opts['summaryMass'] !== undefined) this.summaryMass = numOpt(opts, 'summaryMass', 1, 0);
    if (opts['summaryMassLayer'] !== undefined) {
      const l = numOpt(opts, 'summaryMassLayer', 0, 0);
      if (!Number.isInteger(l) || l >= this.heads.numLayers) throw new WnwError('BAD_ARGUMENT', `option "summaryMassLayer" must be a layer index below ${this.heads.numLayers}, got ${l}`);
      this.summaryMassLayer = l;
    }
    const normalize = opts['normalize'] ?? 'global';
    if (normalize !== 'global' && normalize !== 'layer') throw new WnwError('BAD_ARGUMENT', `option "normalize" must be "global" or "layer", got ${String(normalize)}`);
    this.normalize = normalize;
    const scope = opts['anchorScope'] ?? 'all';
    if (scope !== 'all' && scope !== 'layer') throw new WnwError('BAD_ARGUMENT', `option "anchorScope" must be "all" or "layer", got ${String(scope)}`);
    this.anchorScope = scope;
    this.fullLayer = opts['fullLayer'] === undefined ? undefined : numOpt(opts, 'fullLayer', 0, 0);
    const fullRole = opts['fullRole'];
    if (fullRole !== undefined && fullRole !== 'anchor' && fullRole !== 'tidal' && fullRole !== 'fixed') {
      throw new WnwError('BAD_ARGUMENT', `option "fullRole" must be "anchor", "tidal" or "fixed", got ${String(fullRole)}`);
    }
    this.fullRole = fullRole;
    const ranking = opts['ranking'];
    if (ranking !== undefined && ranking !== 'product' && ranking !== 'voice' && ranking !== 'sensitivity') {
      throw new WnwError('BAD_ARGUMENT', `option "ranking" must be "product", "voice" or "sensitivity", got ${String(ranking)}`);
    }
    const roleOpts = {
      nVoice: opts['nVoice'] === undefined ? undefined : numOpt(opts, 'nVoice', 0, 1),
      anchors: opts['anchors'] === undefined ? undefined : numOpt(opts, 'anchors', 0, 1),
      // Anchors per layer: the roles spread the anchors over the layers, as the recall groups need.
      anchorsPerLayer: scope === 'layer' ? this.heads.numKvHeads : undefined,
    };
    const N = this.heads.numLayers * this.heads.numKvHeads;
    // Calibrated roles are used unless an ablation option asks for something they were not made with.
    const stored = this.heads.roles[budgetKey(this.budget)];
    const sameRanking = ranking === undefined || ranking === (this.heads.ranking ?? 'product');
    const calibrated = stored && sameRanking && roleOpts.nVoice === undefined && roleOpts.anchors === undefined && scope === 'all' && (stored.selection ?? 'segment') === this.selection && opts['segmentFloor'] === undefined && this.normalize === 'global';
    this.score = sameRanking ? headsScore(this.heads) : rankingScore(this.heads.voiceScore, this.heads.headSensitivity, ranking);
    this.calibrated = calibrated ? stored : undefined;
    this.roles = calibrated ? { anchors: [...stored.anchors], tidal: [...stored.tidal], fixed: [...stored.fixed] } : assignRoles(this.score, this.budget, roleOpts);
    if (roleOpts.anchors !== undefined && this.roles.anchors.length < roleOpts.anchors) {
      // assignRoles caps anchors at half the budget and half the voice heads: say so rather than run fewer.
      throw new WnwError('BAD_ARGUMENT', `policy "wnw": ${roleOpts.anchors} anchors do not fit: at budget ${this.budget} with ${this.roles.anchors.length + this.roles.tidal.length} voice heads at most ${this.roles.anchors.length} can be anchors (half the budget's heads and half the voice heads); ask for fewer anchors, more voice heads (nVoice) or a larger budget`);
    }
    if (this.roles.anchors.length + this.roles.tidal.length + this.roles.fixed.length !== N) throw new WnwError('BAD_ARGUMENT', 'heads file roles do not cover every head');
    // Anchors keep all their audio whatever the clip's length: a budget below their share fails on every clip, so say so now.
    if (this.strict && this.roles.anchors.length > this.budget * N + 1e-9) throw this.anchorsOverBudget(this.roles.anchors.length / N);
  }

  request(layout: PolicyLayout): AttentionRequest {
    // One recall group needs the anchors' chunk choice, not their weights: the device reduces them.
    // Groups per layer (anchorScope 'layer') each sum their own anchors: their weights come back.
    const chunks = chunkOptionsFor(this.recall, layout.audioLength, layout.segmentLength);
    const oneGroup = recallGroups(this.roles, layout.numKvHeads, this.anchorScope).length === 1;
    return {
      decodeHeads: [...this.roles.anchors],
      ...(oneGroup ? { decodeWeights: false, decodeChunks: { heads: this.roles.anchors.length, chunkSegments: chunks.chunkSegments, topChunks: chunks.topChunks } } : {}),
      prefillQueries: Math.max(1, layout.instructionLength), ...(this.summaries ? { summaryFit: this.summaryFit, ...this.layerMass() } : {}),
    };
  }

  /** The request's per-layer mass scales, where an option sets them (absent: the whole gap everywhere). */
  private layerMass(): { summaryMass?: number[] } {
    if (this.summaryMass === undefined && this.summaryMassLayer === undefined) return {};
    const alpha = this.summaryMass ?? 1;
    return { summaryMass: Array.from({ length: this.heads.numLayers }, (_, l) => (this.summaryMassLayer === undefined || l === this.summaryMassLayer ? alpha : 0)) };
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
    if (N !== this.heads.numLayers * this.heads.numKvHeads) throw new WnwError('BAD_ARGUMENT', `heads file is for ${this.heads.numLayers}×${this.heads.numKvHeads} KV heads, the model has ${layout.numLayers}×${layout.numKvHeads}`);
    this.layout = layout;
    const T = layout.audioLength;
    const n = layout.segmentLength;
    const { retention, lambda, summaryLength } = this.retention(T, n);
    // The anchors alone over the budget: say so before the prefill runs (schedule() checks the whole plan).
    if (this.strict && this.roles.anchors.length * T > Math.floor(this.budget * N * T + 1e-9)) {
      throw this.anchorsOverBudget(this.roles.anchors.length / N);
    }
    const isTidal = new Set(this.roles.tidal);
    const isAnchor = new Set(this.roles.anchors);
    const full = this.fullHeads(layout);
    const select = (s: Float32Array, h: number): HeadResidency => {
      if (isAnchor.has(h) || full.has(h)) return { gpu: selectByRetention(s, 1, n), cpu: NONE };
      const gpu = selectByRetention(s, retention[h], n, this.selection);
      const summarised = summaryLength > 0 && (!isTidal.has(h) || this.tidalSummaries);
      if (isTidal.has(h)) return { gpu, cpu: complement(gpu, T), ...(summarised ? { summaries: segmentSummaries(gpu, T, n, summaryLength) } : {}) };
      return summarised ? { gpu, cpu: NONE, summaries: segmentSummaries(gpu, T, n, summaryLength) } : { gpu, cpu: NONE };
    };
    return layerwise(
      layout,
      (obs) => obs.scores.map((s, k) => select(s, obs.layer * layout.numKvHeads + k)),
      (heads) => this.schedule(heads, retention, lambda, summaryLength),
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
    const groups = recallGroups(this.roles, layout.numKvHeads, this.anchorScope);
    const costs = groups.map((g) => {
      const cost = new Float64Array(segments);
      for (const t of g.tidal) this.complements[t].forEach((c, s) => (cost[s] += c.length));
      return cost;
    });
    // Heads kept whole for a diagnosis are counted at what their retention would keep, so the others' room is unchanged.
    const full = this.fullHeads(layout);
    let used = 0;
    heads.forEach((r, h) => (used += full.has(h) && !this.roles.anchors.includes(h) ? retainedCount(T, retention[h], n, this.selection) : r.gpu.length + (r.summaries?.length ?? 0)));
    const room = this.strict ? cap - used : Infinity;
    if (this.strict && room < 0) {
      throw this.anchorsOverBudget(used / (N * T));
    }
    const rooms = shareRoom(room, costs.map((c) => c.reduce((a, b) => a + b, 0)));
    const chunkOpts = chunkOptionsFor(this.recall, T, n);
    this.groups = groups.map((group, i) => ({ group, scheduler: new ChunkScheduler(T, n, chunkOpts, costs[i], rooms[i]) }));
    this.stateInfo = { roles: this.roles, retention, lambda, summaryLength, prefillRGpu: used / (N * T || 1) };
    this.lastDecision = undefined;
  }

  private anchorsOverBudget(rGpu: number): WnwError {
    return new WnwError('BAD_ARGUMENT', `policy "wnw": budget ${this.budget} is below what its ${this.roles.anchors.length} anchor heads alone keep (r_GPU ${rGpu.toFixed(3)}); use a larger budget or fewer anchors (option anchors)`);
  }

  /** Positions per summary group: `summaryLength`, within one segment. */
  private groupLength(n: number): number {
    return this.summaryLength > 0 ? Math.min(n, Math.round(this.summaryLength)) : n;
  }

  /** The heads a diagnosis option keeps whole (`fullLayer`, `fullRole`); none by default. */
  private fullHeads(layout: PolicyLayout): Set<number> {
    const out = new Set<number>();
    const H = layout.numKvHeads;
    if (this.fullLayer !== undefined) for (let k = 0; k < H; k++) out.add(this.fullLayer * H + k);
    const role = this.fullRole === 'anchor' ? this.roles.anchors : this.fullRole === 'tidal' ? this.roles.tidal : this.fullRole === 'fixed' ? this.roles.fixed : [];
    for (const h of role) out.add(h);
    return out;
  }

  afterStep(obs: StepObservation): StepPlan {
    if (!this.layout || !this.stateInfo) throw new Error('wnw: afterStep before prefill');
    if (!obs.chunks && obs.weights.length !== this.roles.anchors.length) throw new Error(`wnw: step ${obs.step} exported ${obs.weights.length} heads and no chunks, expected the ${this.roles.anchors.length} anchors`);
    if (this.roles.tidal.length === 0) return EMPTY_PLAN;
    if (obs.chunks && this.groups.length !== 1) throw new Error(`wnw: step ${obs.step} brought one chunk choice for ${this.groups.length} recall groups`);
    const recall: Move[] = [];
    const release: Move[] = [];
    this.groups.forEach(({ group, scheduler }, g) => {
      // The device's chunk choice (one group: every anchor), or A_τ summed over the group's anchors.
      const d = obs.chunks ? scheduler.stepChunks(obs.chunks, obs.step, obs.segmentSums) : scheduler.step(this.anchorSum(group.anchors.map((a) => obs.weights[a])), obs.step);
      if (g === 0) this.lastDecision = d;
      const moves = (segs: number[]): Move[] =>
        group.tidal
          .map((t) => ({ head: this.roles.tidal[t], positions: concatSorted(segs.map((s) => this.complements[t][s])) }))
          .filter((m) => m.positions.length > 0);
      recall.push(...moves(d.recall));
      release.push(...moves(d.release));
    });
    if (recall.length === 0 && release.length === 0) return EMPTY_PLAN;
    const byHead = (a: Move, b: Move) => a.head - b.head;
    return { recall: recall.sort(byHead), release: release.sort(byHead) };
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
   * ablation option such as ranking, nVoice, anchors or selection).
   */
  private retention(T: number, n: number): { retention: number[]; lambda: number; summaryLength: number } {
    if (!this.strict && this.calibrated) {
      return { retention: [...this.calibrated.retention], lambda: this.calibrated.lambda, summaryLength: this.summaries ? this.groupLength(n) : 0 };
    }
    const sNorm = normalizedScores(this.score, this.roles.anchors, this.normalize === 'layer' ? this.heads.numKvHeads : undefined);
    const chunks = chunkOptionsFor(this.recall, T, n);
    const R0 = this.strict ? Math.min(this.reserveOpt ?? chunks.topChunks * chunks.chunkSegments, Math.ceil(T / n)) : 0;
    const tidal = this.roles.tidal;
    // The heads that keep summary slots: the fixed ones, and the tidal ones when asked.
    const summarised = this.tidalSummaries ? [...this.roles.fixed, ...tidal] : this.roles.fixed;
    const reserve = (R: number, ret: number[], len: number) => recallReserve(tidal, ret, R, len, n, this.selection);
    const fit = ([g, R]: [number, number]) => fitLambda(sNorm, this.roles.anchors, [T], this.budget, n, {
      selection: this.selection,
      extra: (ret, len) => reserve(R, ret, len) + (g > 0 ? summarised.reduce((a, h) => a + summarySlots(len, ret[h], n, this.selection, g), 0) : 0),
      floor: segmentFloor(n, this.floorPositions),
    });
    // Where the budget cannot hold the summaries even at λ = 0, the tidal heads' recall
    // reserve shrinks first (to one segment: a fixed head that sees nothing of a segment
    // costs more than a tidal head recalling fewer at once), then the groups grow (twice
    // the length, up to a segment); failing all, no summaries and the whole reserve.
    const tries: [number, number][] = [];
    const g0 = this.summaries ? this.groupLength(n) : 0;
    if (g0 > 0 && this.strict) {
      for (let R = R0; R >= Math.min(1, R0); R--) tries.push([g0, R]);
      for (let g = Math.min(n, 2 * g0); g > g0 && tries.length < 64; g = g >= n ? 0 : Math.min(n, 2 * g)) tries.push([g, Math.min(1, R0)]);
    }
    tries.push([this.strict ? 0 : g0, R0]);
    for (const t of tries) {
      const f = fit(t);
      if (f.rGpu <= this.budget + 1e-12 || t === tries[tries.length - 1]) return { retention: f.retention, lambda: f.lambda, summaryLength: t[0] };
    }
    throw new Error('unreachable');
  }
}
