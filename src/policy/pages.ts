/**
 * Query-aware page selection with a full CPU mirror, shared by ArkVale and Quest.
 * The audio is cut into fixed pages; each page of each head is summarised by the
 * per-channel min and max of its post-RoPE keys, and a query q bounds the page's best
 * logit by Σ_i max(q_i · hi_i, q_i · lo_i). Every step, every head keeps its forced
 * pages (sinks, recent) and the best-bounded pages that fit in ⌊budget · T⌋ positions;
 * unselected pages leave the GPU (their CPU copy stays), selected ones are recalled.
 *
 * One-step lag, as for WnW: the queries a step exports are those of the step just
 * computed; the plan built from them is applied before the next step, so step s+1
 * attends over the pages step s's query chose (the original methods use the current
 * query, which our runtime cannot without a second pass over the pool).
 * GQA: a page's score is the sum of its bounds over the head's g query heads.
 * Prefill has no decode query, so the first selection ranks pages by the summed
 * attention of the last prompt row (the query that predicts the first token).
 */
import type {
  AttentionRequest,
  LayerPrefill,
  Move,
  PolicyLayout,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
} from '../kv/plan.js';
import type { KvPolicy, PolicyOptions } from './types.js';
import { layerwise, prefillAllLayers } from './layered.js';
import { checkBudget, headBudget, range } from './select.js';
import { WnwError } from '../errors.js';

export interface PagedOptions {
  name: string;
  pageSize: number;
  sinkPages: number;
  recentPages: number;
}

export class PagedRecallPolicy implements KvPolicy {
  readonly name: string;
  private readonly budget: number;
  private layout?: PolicyLayout;
  private lo: Float32Array[] = []; // per head: [pages, headDim]
  private hi: Float32Array[] = [];
  private resident: Uint8Array[] = []; // per head, per page
  /** Per head, the pages the prefill chose (never written: a step replaces a head's `resident`). */
  private placed: Uint8Array[] = [];
  private B = 0;
  private pages = 0;

  constructor(
    opts: PolicyOptions,
    private readonly cfg: PagedOptions,
  ) {
    this.name = cfg.name;
    this.budget = checkBudget(cfg.name, opts.budget);
  }

  request(layout: PolicyLayout): AttentionRequest {
    const heads = range(0, layout.numLayers * layout.numKvHeads);
    return {
      decodeHeads: Array.from(heads),
      decodeQueries: true,
      decodeWeights: false,
      prefillQueries: 1,
      prefillKeys: true,
    };
  }

  prefill(obs: PrefillObservation): PrefillPlan {
    return prefillAllLayers(this, obs);
  }

  /** A head's page bounds and first pages come from its own keys and scores: per layer. */
  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    this.layout = layout;
    this.pages = Math.ceil(layout.audioLength / this.cfg.pageSize);
    this.B = headBudget(this.budget, layout.audioLength);
    this.lo = [];
    this.hi = [];
    this.resident = [];
    this.placed = [];
    const all = range(0, layout.audioLength);
    return layerwise(layout, (obs) => {
      if (!obs.keys)
        throw new WnwError('BAD_ARGUMENT', `policy "${this.name}" needs prefill keys (request().prefillKeys)`);
      const keys = obs.keys;
      return obs.scores.map((s, k) => ({ gpu: this.prefillHead(s, keys[k]), cpu: all }));
    });
  }

  /** Bounds one head's pages by its keys and chooses its first pages by its scores; returns their positions. */
  private prefillHead(s: Float32Array, keys: Float32Array): Int32Array {
    const { audioLength: T, headDim: d } = this.layout!;
    const P = this.cfg.pageSize;
    const lo = new Float32Array(this.pages * d).fill(Infinity);
    const hi = new Float32Array(this.pages * d).fill(-Infinity);
    for (let p = 0; p < T; p++) {
      const o = Math.floor(p / P) * d;
      for (let i = 0; i < d; i++) {
        const k = keys[p * d + i];
        if (k < lo[o + i]) lo[o + i] = k;
        if (k > hi[o + i]) hi[o + i] = k;
      }
    }
    this.lo.push(lo);
    this.hi.push(hi);
    const score = new Float64Array(this.pages);
    for (let p = 0; p < T; p++) score[Math.floor(p / P)] += s[p];
    const chosen = this.choose(score);
    this.resident.push(chosen);
    this.placed.push(chosen);
    return this.positionsOf(chosen);
  }

  /** Back to the pages the prefill chose (the runtime puts the KV back to match): a next request decides as the first did. */
  restart(): void {
    if (!this.layout) throw new Error(`${this.name}: restart before prefill`);
    this.resident = [...this.placed];
  }

  afterStep(obs: StepObservation): StepPlan {
    const layout = this.layout;
    if (!layout) throw new Error(`${this.name}: afterStep before prefill`);
    if (!obs.queries) throw new Error(`${this.name}: step ${obs.step} came without queries (request().decodeQueries)`);
    const d = layout.headDim;
    const g = layout.groupSize;
    const recall: Move[] = [];
    const release: Move[] = [];
    for (let h = 0; h < obs.queries.length; h++) {
      const q = obs.queries[h];
      const lo = this.lo[h];
      const hi = this.hi[h];
      const score = new Float64Array(this.pages);
      for (let pg = 0; pg < this.pages; pg++) {
        let s = 0;
        for (let j = 0; j < g; j++) {
          for (let i = 0; i < d; i++) {
            const qi = q[j * d + i];
            const a = qi * hi[pg * d + i];
            const b = qi * lo[pg * d + i];
            s += a > b ? a : b;
          }
        }
        score[pg] = s;
      }
      const chosen = this.choose(score);
      const old = this.resident[h];
      const out = new Uint8Array(this.pages);
      const inn = new Uint8Array(this.pages);
      for (let pg = 0; pg < this.pages; pg++) {
        if (old[pg] && !chosen[pg]) out[pg] = 1;
        if (!old[pg] && chosen[pg]) inn[pg] = 1;
      }
      const rel = this.positionsOf(out);
      const rec = this.positionsOf(inn);
      if (rel.length) release.push({ head: h, positions: rel });
      if (rec.length) recall.push({ head: h, positions: rec });
      this.resident[h] = chosen;
    }
    return { recall, release };
  }

  /** Forced pages first, then the best scores that fit the budget in positions. */
  private choose(score: Float64Array): Uint8Array {
    const T = this.layout!.audioLength;
    const P = this.cfg.pageSize;
    const len = (pg: number) => Math.min(T, (pg + 1) * P) - pg * P;
    const chosen = new Uint8Array(this.pages);
    let used = 0;
    const take = (pg: number) => {
      if (pg < 0 || pg >= this.pages || chosen[pg] || used + len(pg) > this.B) return;
      chosen[pg] = 1;
      used += len(pg);
    };
    for (let pg = 0; pg < this.cfg.sinkPages; pg++) take(pg);
    for (let pg = this.pages - 1; pg >= this.pages - this.cfg.recentPages; pg--) take(pg);
    const order = Array.from(range(0, this.pages)).sort((a, b) => score[b] - score[a] || a - b);
    for (const pg of order) take(pg);
    return chosen;
  }

  private positionsOf(pages: Uint8Array): Int32Array {
    const T = this.layout!.audioLength;
    const P = this.cfg.pageSize;
    const out: number[] = [];
    for (let pg = 0; pg < this.pages; pg++) {
      if (!pages[pg]) continue;
      for (let p = pg * P; p < Math.min(T, (pg + 1) * P); p++) out.push(p);
    }
    return Int32Array.from(out);
  }
}
