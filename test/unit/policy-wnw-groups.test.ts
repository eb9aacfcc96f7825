/** WnW recall groups: anchors of a tidal head's own layer direct its recall under anchorScope 'layer'. */
import { describe, expect, it } from 'vitest';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { recallGroups, shareRoom } from '../../src/policy/wnw/recall-groups.js';
import { assignRoles } from '../../src/policy/wnw/triage.js';
import type { HeadsFile } from '../../src/model/heads.js';
import type { PolicyLayout, StepObservation } from '../../src/kv/plan.js';
import { WnwError } from '../../src/errors.js';
import { ablate, makeLayout, prefillObservation } from './policy-fixtures.js';

/** 2 layers × 4 KV heads: head 0 anchors layer 0, head 4 layer 1; 1, 2 and 5, 6 tidal; 3 and 7 fixed. */
function twoLayerHeads(): HeadsFile {
  const roles = {
    anchors: [0, 4],
    tidal: [1, 2, 5, 6],
    fixed: [3, 7],
    retention: [1, 0.2, 0.2, 0.2, 1, 0.2, 0.2, 0.2],
    lambda: 1,
    measuredRGpu: 0.5,
  };
  return {
    model: 'hand',
    numLayers: 2,
    numKvHeads: 4,
    voiceScore: [9, 8, 7, 1, 9, 8, 7, 1],
    headSensitivity: Array(8).fill(1),
    roles: { '0.5': roles },
  };
}

/** Each anchor's attention on the segments given for it (one list per anchor, in roles.anchors order). */
function anchorsStep(layout: PolicyLayout, step: number, segsPerAnchor: number[][]): StepObservation {
  const n = layout.segmentLength;
  const weights = segsPerAnchor.map((segs) => {
    const w = new Float32Array(layout.audioLength);
    for (const s of segs) for (let p = s * n; p < Math.min(layout.audioLength, (s + 1) * n); p++) w[p] = 1;
    return w;
  });
  return { step, weights };
}

describe('WnW recall groups', () => {
  const roles = { anchors: [0, 4], tidal: [1, 2, 5, 6, 9], fixed: [3, 7, 8, 10, 11] };

  it("'all' is the paper's one group; 'layer' gives each anchored layer its own, the rest follow every anchor", () => {
    expect(recallGroups(roles, 4, 'all')).toEqual([{ anchors: [0, 1], tidal: [0, 1, 2, 3, 4] }]);
    expect(recallGroups(roles, 4, 'layer')).toEqual([
      { anchors: [0, 1], tidal: [4] }, // head 9: layer 2 has no anchor
      { anchors: [0], tidal: [0, 1] },
      { anchors: [1], tidal: [2, 3] },
    ]);
  });

  it('shares the recall room in whole positions, in proportion to what each group holds on the CPU', () => {
    expect(shareRoom(100, [1, 3])).toEqual([25, 75]);
    expect(shareRoom(10, [1, 1, 1]).reduce((a, b) => a + b, 0)).toBe(10);
    expect(shareRoom(Infinity, [1, 2])).toEqual([Infinity, Infinity]);
  });

  it("under 'layer' a tidal head recalls what its own layer's anchor attends to", () => {
    const layout = makeLayout(2, 4, 250);
    const obs = prefillObservation(layout, 1);
    const step = anchorsStep(layout, 1, [[2], [7]]);
    const recalledHeads = (scope: 'all' | 'layer') => {
      const p = new WnwPolicy({
        budget: 0.5,
        heads: twoLayerHeads(),
        strictBudget: false,
        topChunks: 1,
        ...ablate({ nVoice: 6, anchors: 2, anchorScope: scope }),
      });
      expect(p.headRoles).toMatchObject({ anchors: [0, 4], tidal: [1, 2, 5, 6] });
      p.prefill(obs);
      const moves = p.afterStep(step).recall;
      // Which segment each head's recalled positions fall in.
      return Object.fromEntries(
        moves.map((m) => [m.head, [...new Set(Array.from(m.positions, (x) => Math.floor(x / layout.segmentLength)))]]),
      ) as Record<number, number[]>;
    };
    // One top chunk (4 s, two segments): with every anchor summed, the tie goes to the lower chunk for all heads.
    const all = recalledHeads('all');
    expect(all[1]).toEqual(all[5]);
    const layer = recalledHeads('layer');
    for (const h of [1, 2]) expect(layer[h].every((s) => s === 1 || s === 2)).toBe(true);
    for (const h of [5, 6]) expect(layer[h].every((s) => s === 6 || s === 7)).toBe(true);
  });

  it('spreads the anchors over the layers that hold two or more voice heads, then takes them by rank', () => {
    // Layer 2 (heads 8–11) scores highest; layers 0 and 1 hold two voice heads each, layer 3 none.
    const score = [5, 4, 0, 0, 6, 3, 0, 0, 9, 8, 7, 1, 0.5, 0.4, 0.3, 0.2];
    const opts = { nVoice: 8, anchors: 3 };
    expect(assignRoles(score, 0.4, opts).anchors).toEqual([8, 9, 10]);
    expect(assignRoles(score, 0.4, { ...opts, anchorsPerLayer: 4 })).toEqual({
      anchors: [0, 4, 8],
      tidal: [1, 5, 9, 10, 11],
      fixed: [2, 3, 6, 7, 12, 13, 14, 15],
    });
    // One anchor only: the best layer's.
    expect(assignRoles(score, 0.4, { nVoice: 8, anchors: 1, anchorsPerLayer: 4 }).anchors).toEqual([8]);
  });

  it("asks the device for the chunk choice with one recall group, for the anchors' weights with one per layer", () => {
    const layout = makeLayout(2, 4, 250);
    const opts = { budget: 0.5, heads: twoLayerHeads(), strictBudget: false };
    const variant = { nVoice: 6, anchors: 2 };
    expect(new WnwPolicy({ ...opts, ...ablate({ ...variant, anchorScope: 'all' }) }).request(layout)).toMatchObject({
      decodeWeights: false,
      decodeChunks: { heads: 2 },
    });
    const perLayer = new WnwPolicy({ ...opts, ...ablate({ ...variant, anchorScope: 'layer' }) }).request(layout);
    expect(perLayer.decodeChunks).toBeUndefined();
    expect(perLayer.decodeWeights).not.toBe(false);
  });

  it('refuses an unknown scope', () => {
    expect(() => new WnwPolicy({ budget: 0.5, heads: twoLayerHeads(), ...ablate({ anchorScope: 'head' }) })).toThrow(
      WnwError,
    );
  });
});
