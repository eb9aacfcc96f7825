/**
 * WnW: waxing-and-waning KV cache (Yao et al. 2026).
 *
 * Prefill: anchors keep all their audio; every other head keeps, inside every 2 s
 * segment, its top ⌊retention · n_s⌋ positions by text-to-audio attention (the prompt's
 * instruction rows, the g query heads combined by sum — the observation's convention).
 * Tidal heads move the rest to the CPU (recallable); fixed heads drop it.
 * Decode: after each step, A_τ = Σ of the anchor query heads' softmax weights (reset each
 * step); the chunk scheduler (chunks.ts) picks the top-3 4 s chunks and every tidal head
 * recalls the selected segments it lacks and releases those unselected for δ = 3 steps.
 * The plan takes effect at the next step (one-step lag).
 *
 * Open points, decided here:
 * - Recall brings only a segment's CPU complement (its prefill-selected positions never
 *   left), and release drops only what was recalled: a tidal head never falls below its
 *   prefill selection, and no position is moved twice.
 * - Budget (`strictBudget`, default true): r_GPU stays ≤ the target at every step. At
 *   prefill λ is re-fitted for this clip so that prefill plus a recall reserve fits —
 *   the reserve is the complement of `reserveSegments` (default topChunks · chunkSegments,
 *   what one selection can name) full segments per tidal head — and the scheduler's cap
 *   releases stale recalled segments early when a recall would exceed the budget. With
 *   `strictBudget: false` the calibrated retention is used as is and recalls are not
 *   capped, as in the paper (whose measured r_GPU was 22.3 % at a 0.2 target).
 * - Segment floor (`segmentFloor`, default 1 position): every non-anchor head keeps at
 *   least that many positions per segment, or as many as the budget holds, so
 *   ⌊retention · n_s⌋ cannot round a low-scored head down to no audio at all (triage.ts
 *   `segmentFloor`, `fitLambda`); 0 is the formula as written.
 */
import { WnwError } from '../../errors.js';
import type { AttentionRequest, HeadResidency, LayerPrefill, Move, PolicyLayout, PrefillObservation, PrefillPlan, StepObservation, StepPlan } from '../../kv/plan.js';
import { EMPTY_PLAN } from '../../kv/plan.js';
import type { HeadRoles, HeadsFile } from '../../model/heads.js';
import type { KvPolicy, PolicyOptions } from '../types.js';
import { checkBudget, complement, concatSorted, NONE, numOpt, selectByRetention } from '../select.js';
import { layerwise, prefillAllLayers } from '../layered.js';
import { ChunkScheduler, PAPER_CHUNKS, type ChunkDecision, type ChunkOptions } from './chunks.js';
import { assignRoles, budgetKey, fitLambda, headsScore, normalizedScores, rankingScore, segmentFloor, type Roles, type Selection } from './triage.js';

export interface WnwState {
  roles: Roles;
  retention: number[];
  lambda: number;
  /** r_GPU right after prefill. */
  prefillRGpu: number;
}

export class WnwPolicy implements KvPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['chunkSegments', 'topChunks', 'delta', 'selection', 'strictBudget', 'reserveSegments', 'ranking', 'nVoice', 'anchors', 'segmentFloor'];
  readonly name = 'wnw';
  private readonly budget: number;
  private readonly heads: HeadsFile;
  private readonly chunkOpts: ChunkOptions;
  private readonly selection: Selection;
  private readonly strict: boolean;
  private readonly reserveSegments: number;
  /** Positions per segment every non-anchor head keeps at least (triage.ts `segmentFloor`). */
  private readonly floorPositions: number;
  private readonly score: number[];
  private readonly calibrated?: HeadRoles;
  private layout?: PolicyLayout;
  private roles!: Roles;
  private scheduler?: ChunkScheduler;
  /** Per tidal head (order of roles.tidal), per segment: its CPU complement. */
  private complements: Int32Array[][] = [];
  private stateInfo?: WnwState;
  /** The last step's scheduler decision (for the tide chart and tests). */
  lastDecision?: ChunkDecision;

  constructor(opts: PolicyOptions) {
    this.budget = checkBudget(this.name, opts.budget);
    if (!opts.heads) throw new WnwError('BAD_ARGUMENT', 'policy "wnw" needs the heads file (heads.json, from npm run calibrate)');
    this.heads = opts.heads;
    this.chunkOpts = {
      chunkSegments: numOpt(opts, 'chunkSegments', PAPER_CHUNKS.chunkSegments, 1),
      topChunks: numOpt(opts, 'topChunks', PAPER_CHUNKS.topChunks, 1),
      delta: numOpt(opts, 'delta', PAPER_CHUNKS.delta, 1),
    };
    const sel = opts['selection'] ?? 'segment';
    if (sel !== 'segment' && sel !== 'global') throw new WnwError('BAD_ARGUMENT', `option "selection" must be "segment" or "global", got ${String(sel)}`);
    this.selection = sel;
    this.strict = opts['strictBudget'] !== false;
    this.reserveSegments = numOpt(opts, 'reserveSegments', this.chunkOpts.topChunks * this.chunkOpts.chunkSegments, 0);
    this.floorPositions = numOpt(opts, 'segmentFloor', 1, 0);
    const ranking = opts['ranking'];
    if (ranking !== undefined && ranking !== 'product' && ranking !== 'voice' && ranking !== 'sensitivity') {
      throw new WnwError('BAD_ARGUMENT', `option "ranking" must be "product", "voice" or "sensitivity", got ${String(ranking)}`);
    }
    const roleOpts = {
      nVoice: opts['nVoice'] === undefined ? undefined : numOpt(opts, 'nVoice', 0, 1),
      anchors: opts['anchors'] === undefined ? undefined : numOpt(opts, 'anchors', 0, 1),
    };
    const N = this.heads.numLayers * this.heads.numKvHeads;
    // Calibrated roles are used unless an ablation option asks for something they were not made with.
    const stored = this.heads.roles[budgetKey(this.budget)];
    const sameRanking = ranking === undefined || ranking === (this.heads.ranking ?? 'product');
    const calibrated = stored && sameRanking && roleOpts.nVoice === undefined && roleOpts.anchors === undefined && (stored.selection ?? 'segment') === this.selection && opts['segmentFloor'] === undefined;
    this.score = sameRanking ? headsScore(this.heads) : rankingScore(this.heads.voiceScore, this.heads.headSensitivity, ranking);
    this.calibrated = calibrated ? stored : undefined;
    this.roles = calibrated ? { anchors: [...stored.anchors], tidal: [...stored.tidal], fixed: [...stored.fixed] } : assignRoles(this.score, this.budget, roleOpts);
    if (this.roles.anchors.length + this.roles.tidal.length + this.roles.fixed.length !== N) throw new WnwError('BAD_ARGUMENT', 'heads file roles do not cover every head');
  }

  request(layout: PolicyLayout): AttentionRequest {
    return { decodeHeads: [...this.roles.anchors], prefillQueries: Math.max(1, layout.instructionLength) };
  }

  /** Roles, retention and λ in use (after prefill). */
  get state(): WnwState | undefined {
    return this.stateInfo;
  }

  get chunkScheduler(): ChunkScheduler | undefined {
    return this.scheduler;
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
    const { retention, lambda } = this.retention(T, n);
    // The anchors alone over the budget: say so before the prefill runs (schedule() checks the whole plan).
    if (this.strict && this.roles.anchors.length * T > Math.floor(this.budget * N * T + 1e-9)) {
      throw new WnwError('BAD_ARGUMENT', `wnw: budget ${this.budget} is below what the ${this.roles.anchors.length} anchor heads alone keep (r_GPU ${(this.roles.anchors.length / N).toFixed(3)}); use a larger budget or fewer anchors`);
    }
    const isTidal = new Set(this.roles.tidal);
    const isAnchor = new Set(this.roles.anchors);
    const select = (s: Float32Array, h: number): HeadResidency => {
      if (isAnchor.has(h)) return { gpu: selectByRetention(s, 1, n), cpu: NONE };
      const gpu = selectByRetention(s, retention[h], n, this.selection);
      return { gpu, cpu: isTidal.has(h) ? complement(gpu, T) : NONE };
    };
    return layerwise(
      layout,
      (obs) => obs.scores.map((s, k) => select(s, obs.layer * layout.numKvHeads + k)),
      (heads) => this.schedule(heads, retention, lambda),
    );
  }

  /** The chunk scheduler over the finished plan: per-segment recall costs and the room left in the budget. */
  private schedule(heads: HeadResidency[], retention: number[], lambda: number): void {
    const layout = this.layout!;
    const N = heads.length;
    const T = layout.audioLength;
    const n = layout.segmentLength;
    const cap = Math.floor(this.budget * N * T + 1e-9);
    const segments = Math.ceil(T / n);
    const cost = new Float64Array(segments);
    this.complements = this.roles.tidal.map((h) => {
      const perSeg: Int32Array[] = [];
      const cpu = heads[h].cpu;
      let i = 0;
      for (let s = 0; s < segments; s++) {
        const j0 = i;
        while (i < cpu.length && cpu[i] < (s + 1) * n) i++;
        perSeg.push(cpu.subarray(j0, i));
        cost[s] += i - j0;
      }
      return perSeg;
    });
    let used = 0;
    for (const r of heads) used += r.gpu.length;
    const room = this.strict ? cap - used : Infinity;
    if (this.strict && room < 0) {
      throw new WnwError('BAD_ARGUMENT', `wnw: budget ${this.budget} is below what the ${this.roles.anchors.length} anchor heads alone keep (r_GPU ${(used / (N * T)).toFixed(3)}); use a larger budget or fewer anchors`);
    }
    this.scheduler = new ChunkScheduler(T, n, this.chunkOpts, cost, room);
    this.stateInfo = { roles: this.roles, retention, lambda, prefillRGpu: used / (N * T || 1) };
    this.lastDecision = undefined;
  }

  afterStep(obs: StepObservation): StepPlan {
    const sched = this.scheduler;
    if (!sched || !this.layout) throw new Error('wnw: afterStep before prefill');
    if (obs.weights.length !== this.roles.anchors.length) throw new Error(`wnw: step ${obs.step} exported ${obs.weights.length} heads, expected the ${this.roles.anchors.length} anchors`);
    if (this.roles.tidal.length === 0) return EMPTY_PLAN;
    const T = this.layout.audioLength;
    // A_τ: the observation already sums each anchor's g query heads; sum over anchors.
    const A = new Float64Array(T);
    for (const w of obs.weights) for (let p = 0; p < T; p++) A[p] += w[p];
    const d = sched.step(A, obs.step);
    this.lastDecision = d;
    if (d.recall.length === 0 && d.release.length === 0) return EMPTY_PLAN;
    const moves = (segs: number[]): Move[] =>
      this.roles.tidal
        .map((head, t) => ({ head, positions: concatSorted(segs.map((s) => this.complements[t][s])) }))
        .filter((m) => m.positions.length > 0);
    return { recall: moves(d.recall), release: moves(d.release) };
  }

  /**
   * Retention for this clip. Strict: re-fit λ on this clip's length so prefill plus the
   * recall reserve is within budget. Otherwise the calibrated retention, re-fitted on
   * this clip without reserve only when no calibrated roles apply (missing budget, or an
   * ablation option such as ranking, nVoice, anchors or selection).
   */
  private retention(T: number, n: number): { retention: number[]; lambda: number } {
    if (!this.strict && this.calibrated) return { retention: [...this.calibrated.retention], lambda: this.calibrated.lambda };
    const sNorm = normalizedScores(this.score, this.roles.anchors);
    const fullSegs = Math.floor(T / n);
    const R = this.strict ? Math.min(this.reserveSegments, Math.ceil(T / n)) : 0;
    const tidal = this.roles.tidal;
    const reserve = (ret: number[], len: number) => {
      let extra = 0;
      for (const h of tidal) {
        if (this.selection === 'segment') {
          // R full segments' complements, or all but the kept when fewer full segments exist.
          extra += Math.min(R, fullSegs) * (n - Math.floor(ret[h] * n + 1e-9));
          if (R > fullSegs && len % n) extra += len % n - Math.floor(ret[h] * (len % n) + 1e-9);
        } else {
          extra += Math.min(R * n, len - Math.floor(ret[h] * len + 1e-9));
        }
      }
      return extra;
    };
    const fit = fitLambda(sNorm, this.roles.anchors, [T], this.budget, n, {
      selection: this.selection,
      extra: reserve,
      floor: segmentFloor(n, this.floorPositions),
    });
    return { retention: fit.retention, lambda: fit.lambda };
  }
}
