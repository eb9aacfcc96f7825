/** What a policy means for a run, said by the policy classes (registry.ts) rather than by their callers. */
import { describe, expect, it } from 'vitest';
import { POLICIES, createPolicy, hasFixedBudget, needsHeads, policyBudget } from '../../src/policy/registry.js';
import { wordTimingHeads } from '../../src/policy/timing-heads.js';
import { ablate, makeLayout, syntheticHeads } from './policy-fixtures.js';

describe('policy registry', () => {
  it('the full cache runs at budget 1 whatever is asked; every other policy at the budget asked', () => {
    expect(policyBudget('full', 0.2)).toBe(1);
    expect(hasFixedBudget('full')).toBe(true);
    for (const name of Object.keys(POLICIES).filter((n) => n !== 'full')) {
      expect(policyBudget(name, 0.2)).toBe(0.2);
      expect(hasFixedBudget(name)).toBe(false);
    }
    expect(() => policyBudget('nope', 0.2)).toThrow(/unknown policy "nope"/);
  });

  it('WnW and AudioKV need the calibrated heads file; the rest do not', () => {
    expect(Object.keys(POLICIES).filter(needsHeads).sort()).toEqual(['audiokv', 'wnw']);
  });

  it("words are dated by a triaging policy's own anchors, else by the calibrated ones", () => {
    const layout = makeLayout(4, 8, 400);
    const heads = syntheticHeads(layout, 3);
    const wnw = createPolicy('wnw', { budget: 0.2, heads, ...ablate({ anchors: 1 }) });
    expect(wordTimingHeads(wnw, heads, 0.2)).toEqual([...wnw.headRoles!.anchors]);
    expect(wnw.headRoles!.anchors).toHaveLength(1);
    const calibrated = wordTimingHeads(createPolicy('quest', { budget: 0.2 }), heads, 0.2);
    expect(calibrated).toEqual([...createPolicy('wnw', { budget: 0.2, heads }).headRoles!.anchors]);
    // The full cache's budget 1 is past the calibrated roles: 0.8's anchors.
    expect(wordTimingHeads(createPolicy('full', { budget: 1 }), heads, 1).length).toBeGreaterThan(0);
    expect(wordTimingHeads(createPolicy('quest', { budget: 0.2 }), undefined, 0.2)).toEqual([]);
  });
});
