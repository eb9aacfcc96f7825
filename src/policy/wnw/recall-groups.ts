/**
 * Which anchors direct which tidal heads' recall. The paper sums every anchor's attention
 * into one A_τ and recalls the same segments for every tidal head (`anchorScope` 'all').
 * On long recordings a layer-2 anchor covers only a small share of what the tidal heads of
 * layers 0 and 1 attend to (docs/wnw-long-audio.md section 1), so with 'layer' (anchors per
 * layer) the roles spread the anchors over the layers (triage.ts `assignRoles`), and a tidal
 * head whose layer holds anchors follows those anchors alone, with a chunk scheduler of its
 * own; tidal heads in layers without an anchor keep following all of them.
 */
import type { Roles } from './triage.js';

export type AnchorScope = 'all' | 'layer';

export interface RecallGroup {
  /** Indices into roles.anchors whose attention is summed into this group's A_τ. */
  anchors: number[];
  /** Indices into roles.tidal that recall what this group's scheduler selects. */
  tidal: number[];
}

export function recallGroups(roles: Roles, numKvHeads: number, scope: AnchorScope): RecallGroup[] {
  const all = roles.anchors.map((_, i) => i);
  if (scope === 'all' || roles.tidal.length === 0) return [{ anchors: all, tidal: roles.tidal.map((_, t) => t) }];
  const layerOf = (h: number) => Math.floor(h / numKvHeads);
  const byLayer = new Map<number, number[]>();
  roles.anchors.forEach((h, i) => byLayer.set(layerOf(h), [...(byLayer.get(layerOf(h)) ?? []), i]));
  const groups = new Map<number, RecallGroup>(); // key: the layer, or -1 for "all anchors"
  roles.tidal.forEach((h, t) => {
    const key = byLayer.has(layerOf(h)) ? layerOf(h) : -1;
    const g = groups.get(key) ?? { anchors: key < 0 ? all : byLayer.get(key)!, tidal: [] };
    g.tidal.push(t);
    groups.set(key, g);
  });
  return [...groups.entries()].sort((a, b) => a[0] - b[0]).map(([, g]) => g);
}

/**
 * The recall room shared between groups in proportion to what their tidal heads hold in
 * CPU memory (their recall cost over all segments), in whole positions that sum to `room`.
 */
export function shareRoom(room: number, groupCost: number[]): number[] {
  if (!Number.isFinite(room)) return groupCost.map(() => Infinity);
  const total = groupCost.reduce((a, b) => a + b, 0);
  if (total <= 0) return groupCost.map((_, i) => (i === 0 ? room : 0));
  const shares = groupCost.map((c) => Math.floor((room * c) / total));
  shares[0] += room - shares.reduce((a, b) => a + b, 0);
  return shares;
}
