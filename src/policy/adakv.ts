/**
 * Ada-KV (Feng et al. 2024), as Ada-SnapKV: SnapKV scores (window 32, kernel 7, max
 * pooling), and the layer's budget H_kv · B shared by one layer-wide top-k over all its
 * heads' scores, after each head has its guaranteed floor_alpha · B (0.8) best positions.
 * Scores of different heads are compared raw, as Ada-KV does (each is a softmax mass).
 * No recall.
 */
import type { HeadResidency, LayerPrefill, PolicyLayout } from '../kv/plan.js';
import type { PolicyOptions } from './types.js';
import { headBudget, NONE, numOpt, topK } from './select.js';
import { snapScores, SnapKVPolicy } from './snapkv.js';
import { layerwise } from './layered.js';

export class AdaKVPolicy extends SnapKVPolicy {
  /** The options this policy reads (anything else is a typo: BAD_ARGUMENT). */
  static override readonly options: readonly string[] = ['window', 'kernel', 'floorAlpha'];
  private readonly floorAlpha: number;

  constructor(opts: PolicyOptions) {
    super(opts, 'adakv', 'max');
    this.floorAlpha = numOpt(opts, 'floorAlpha', 0.8, 0);
  }

  /** The shared budget is a layer's (H_kv · B): per layer. */
  override prefillByLayer(layout: PolicyLayout): LayerPrefill {
    const T = layout.audioLength;
    const H = layout.numKvHeads;
    const B = headBudget(this.budget, T);
    const floor = Math.min(B, Math.floor(this.floorAlpha * B));
    return layerwise(layout, (obs) => {
      const heads: HeadResidency[] = [];
      const scores = obs.scores.map((raw) => snapScores(raw, layout, this.window, this.kernel, this.pooling));
      const keep = scores.map(() => new Uint8Array(T));
      let used = 0;
      for (let k = 0; k < H; k++) {
        // The forced window counts inside the floor (it is kept first either way).
        for (const p of topK(scores[k], floor)) keep[k][p] = 1;
        used += floor;
      }
      // Layer-wide top-k over the flattened (head, position) scores not yet kept.
      const flat = new Float32Array(H * T);
      const candidates: number[] = [];
      for (let k = 0; k < H; k++) {
        for (let p = 0; p < T; p++) {
          flat[k * T + p] = scores[k][p];
          if (!keep[k][p]) candidates.push(k * T + p);
        }
      }
      for (const i of topK(flat, H * B - used, candidates)) keep[Math.floor(i / T)][i % T] = 1;
      for (let k = 0; k < H; k++) {
        const gpu: number[] = [];
        for (let p = 0; p < T; p++) if (keep[k][p]) gpu.push(p);
        heads.push({ gpu: Int32Array.from(gpu), cpu: NONE });
      }
      return heads;
    });
  }
}
