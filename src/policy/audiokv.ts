/**
 * AudioKV (He et al. 2026): heads that ground audio get more of the budget, and position
 * scores are smoothed along time before the top-k. Per head budget = base + a share of the
 * rest proportional to the head's audio-grounding score, which we take from calibration
 * (the Voice Score of heads.json: the same top-K-inside-the-word-span measurement).
 * Position scores: SnapKV's window scores (w = 32), smoothed by Spectral Score Smoothing
 * α · lowpass(s) + (1 − α) · s with α = 0.5 and a low-pass cutoff of one cycle per 32
 * positions (SSS takes the place of SnapKV's pooling). No recall.
 *
 * The base is not pinned down by the sources we have: `baseShare` (default 0.5) of the
 * uniform per-head budget is the base, the other half follows the grounding score.
 */
import { WnwError } from '../errors.js';
import type { LayerPrefill, PolicyLayout } from '../kv/plan.js';
import type { PolicyOptions } from './types.js';
import { checkBudget, headBudget, NONE, numOpt, spectralSmooth, topK } from './select.js';
import { OBSERVATION_WINDOW, windowAudio } from './snapkv.js';
import { layerwise, PrefillOnlyPolicy } from './layered.js';

/**
 * Integer budgets summing to at most `total`, each ≤ cap: base each, the rest ∝ weight,
 * water-filled (what a capped head cannot take goes to the others), remainders by
 * largest fraction.
 */
export function allocateBudgets(weights: number[], base: number, total: number, cap: number): Int32Array {
  const n = weights.length;
  const share = new Float64Array(n).fill(Math.min(base, cap));
  let rest = total - share.reduce((a, b) => a + b, 0);
  const open = new Set(weights.map((_, i) => i).filter((i) => share[i] < cap));
  while (rest > 1e-9 && open.size > 0) {
    let w = 0;
    for (const i of open) w += Math.max(0, weights[i]);
    let spent = 0;
    for (const i of [...open]) {
      const add = w > 0 ? (rest * Math.max(0, weights[i])) / w : rest / open.size;
      const take = Math.min(add, cap - share[i]);
      share[i] += take;
      spent += take;
      if (share[i] >= cap - 1e-9) open.delete(i);
    }
    rest -= spent;
    if (spent <= 1e-12) break;
  }
  const out = Int32Array.from(share, (x) => Math.floor(x + 1e-9));
  let left = total - out.reduce((a, b) => a + b, 0);
  const order = Array.from(share.keys()).sort(
    (a, b) => share[b] - Math.floor(share[b] + 1e-9) - (share[a] - Math.floor(share[a] + 1e-9)) || a - b,
  );
  for (const i of order) {
    if (left < 1) break;
    if (out[i] < cap) {
      out[i]++;
      left--;
    }
  }
  return out;
}

export class AudioKVPolicy extends PrefillOnlyPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static readonly options: readonly string[] = ['window', 'alpha', 'lowpassWindow', 'baseShare'];
  static readonly needsHeads = true;
  readonly name = 'audiokv';
  private readonly budget: number;
  private readonly grounding: number[];
  private readonly window: number;
  protected readonly prefillQueries: number;
  private readonly alpha: number;
  private readonly lowpassWindow: number;
  private readonly baseShare: number;

  constructor(opts: PolicyOptions) {
    super();
    this.budget = checkBudget(this.name, opts.budget);
    if (!opts.heads)
      throw new WnwError(
        'BAD_ARGUMENT',
        'policy "audiokv" needs the heads file (heads.json, from npm run calibrate) for its grounding scores',
      );
    this.grounding = opts.heads.voiceScore;
    this.window = numOpt(opts, 'window', OBSERVATION_WINDOW, 1);
    this.prefillQueries = this.window;
    this.alpha = numOpt(opts, 'alpha', 0.5, 0);
    this.lowpassWindow = numOpt(opts, 'lowpassWindow', 32, 1);
    this.baseShare = numOpt(opts, 'baseShare', 0.5, 0);
  }

  /**
   * Per layer: the budgets are shared across every head of the model, but they follow
   * the calibrated grounding scores, known before any prefill; each head's top-k is over
   * its own scores.
   */
  prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const T = layout.audioLength;
    const N = layout.numLayers * layout.numKvHeads;
    if (this.grounding.length !== N)
      throw new WnwError(
        'BAD_ARGUMENT',
        `heads file has ${this.grounding.length} voice scores, the model has ${N} KV heads`,
      );
    const B = headBudget(this.budget, T);
    const budgets = allocateBudgets(this.grounding, Math.floor(this.baseShare * B), N * B, T);
    const forced = windowAudio(layout, this.window);
    return layerwise(layout, (obs) =>
      obs.scores.map((raw, k) => {
        const s = spectralSmooth(raw, this.alpha, this.lowpassWindow);
        for (let p = T - forced; p < T; p++) s[p] = Infinity;
        return { gpu: topK(s, budgets[obs.layer * layout.numKvHeads + k]), cpu: NONE };
      }),
    );
  }
}
