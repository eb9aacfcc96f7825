/**
 * Placing a layer-by-layer prefill on the CPU backend: each layer's plan, as soon as the
 * policy has made it, becomes one shard of the paged pool, its kept rows written into the
 * pages and its released rows into the CPU offload store. Only one layer's prompt K/V is
 * alive at a time, which is what lets a long clip prefill under a tight KV byte cap.
 */
import { audioStart, kvHeadCount, segmentLength, type ModelConfig, type PromptIds } from '../../model/config.js';
import { Residency } from '../../kv/residency.js';
import { checkPoolLimit, poolNeed } from '../../kv/sizing.js';
import { slotBytes } from '../../kv/precision.js';
import type { HeadResidency, LayerPrefill, PolicyLayout, SummaryFitting } from '../../kv/plan.js';
import { layerAudioKeys } from '../../reference/prefill.js';
import { policyLayout, summaryPlacement, textPositions } from '../../kv/prompt.js';
import { CpuPageStorage } from './storage.js';

export interface LayerPlacementOptions {
  /** KV bytes per element (4: f32, 2: f16). */
  elementBytes: number;
  /** How the pool grows as text is generated (ResidencyShape.growPages, maxPages). */
  growth: { growPages: number; maxPages?: number };
  /** The request's query window for the scores handed to the policy, and whether it wants the keys. */
  prefillQueries: number;
  prefillKeys: boolean;
  /** How summary slots are made (the layers' `LayerPrefill.fitting`). */
  fitting?: SummaryFitting;
  kvMaxBytes?: number;
  /** Accounts for KV bytes the storage takes (the backend's live / peak memory). */
  hold: (bytes: number) => void;
  /** The session's prompt around the audio. */
  prompt: PromptIds;
}

export class LayerPlacement {
  readonly residency: Residency;
  readonly storage: CpuPageStorage;
  readonly layout: PolicyLayout;
  bytesToCpu = 0;
  private pages = 0;
  private readonly text: number[];

  constructor(
    private readonly c: ModelConfig,
    private readonly N: number,
    private readonly run: LayerPrefill,
    private readonly o: LayerPlacementOptions,
  ) {
    const hd = c.headDim;
    this.text = textPositions(o.prompt, N);
    this.layout = policyLayout(c, N, o.prompt);
    this.storage = new CpuPageStorage(hd, o.elementBytes === 2, segmentLength(c), o.hold);
    this.residency = new Residency(
      {
        heads: kvHeadCount(c),
        headDim: hd,
        pageSize: segmentLength(c),
        numPages: 0,
        shards: [],
        kvElementBytes: o.elementBytes,
        audioStart: audioStart(o.prompt),
        audioLength: N,
        ...o.growth,
      },
      this.storage,
    );
  }

  /** Layer `l`'s prompt K/V ([prompt, kvHeads × headDim]), its scores by query window and its instruction rows' queries. */
  place(
    l: number,
    k: Float32Array,
    v: Float32Array,
    scores: Map<number, Float32Array[]>,
    instructionQueries: Float32Array,
  ): void {
    const { c, N, o } = this;
    const H = c.numKvHeads;
    const hd = c.headDim;
    const kvd = H * hd;
    const P = segmentLength(c);
    const heads: HeadResidency[] = this.run.layer({
      layout: this.layout,
      layer: l,
      // Copies: a policy may keep or modify its scores, and the memo serves the next one.
      scores: scores
        .get(o.prefillQueries)!
        .slice(l * H, (l + 1) * H)
        .map((a) => Float32Array.from(a)),
      keys: o.prefillKeys ? layerAudioKeys(c, k, N, audioStart(o.prompt)) : undefined,
    });
    // The prompt's text only: generated tokens' pages come as they are generated.
    const need = poolNeed({ heads }, P, this.text.length);
    this.pages += need.total;
    const bytes = this.pages * P * slotBytes(hd, o.elementBytes);
    checkPoolLimit(bytes, o.kvMaxBytes, `${N} audio tokens under this policy (at layer ${l})`);
    const shard = this.residency.addShard(l * H, H, need.total);
    o.hold(this.storage.addShard(l, 1, shard.firstPage * P, need.total * P));
    const rowOf = (head: number, pos: number) => pos * kvd + (head % H) * hd;
    const placed = this.residency.applyPrefillHeads(
      l * H,
      heads,
      this.text,
      (head, pos, kk, kOff, vv, vOff) => {
        const r = rowOf(head, pos);
        kk.set(k.subarray(r, r + hd), kOff);
        vv.set(v.subarray(r, r + hd), vOff);
      },
      summaryPlacement(c, o.fitting, () => instructionQueries),
    );
    for (const g of placed.gathers) {
      for (let i = 0; i < g.slots.length; i++) {
        const r = rowOf(g.head, g.seqPositions[i]);
        this.storage.writeRows(g.slots[i], 1, k.subarray(r, r + hd), v.subarray(r, r + hd));
      }
    }
    this.bytesToCpu += placed.transfer.bytesToCpu;
  }
}
