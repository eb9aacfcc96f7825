/** WnW's method options apart from its ablations and diagnoses: which route reaches which (ablations.ts, registry.ts). */
import { describe, expect, it } from 'vitest';
import { WnwError } from '../../src/errors.js';
import { parsePolicySpec } from '../../src/cli/args.js';
import { checkPolicyOptions, createPolicy, forEvaluation } from '../../src/policy/registry.js';
import { EVALUATION_OPTIONS } from '../../src/policy/types.js';
import { WnwPolicy } from '../../src/policy/wnw/policy.js';
import { WNW_OPTIONS, parseWnwOptions } from '../../src/policy/wnw/options.js';
import {
  WNW_ABLATIONS,
  WNW_DIAGNOSES,
  calibrationChangedBy,
  parseWnwAblations,
} from '../../src/policy/wnw/ablations.js';
import { ablate, makeLayout, prefillObservation, syntheticHeads } from './policy-fixtures.js';

/** Every option WnW read before the split, in one bag. */
const BEFORE = [
  'chunkSegments',
  'topChunks',
  'recallEvery',
  'delta',
  'lead',
  'selection',
  'strictBudget',
  'reserveSegments',
  'ranking',
  'nVoice',
  'anchors',
  'segmentFloor',
  'summaries',
  'summaryLength',
  'summaryFit',
  'summaryMass',
  'summaryMassLayer',
  'tidalSummaries',
  'anchorScope',
  'normalize',
  'scorePower',
  'maxRetention',
  'fullLayer',
  'fullRole',
  'planLag',
  'prefillRecall',
];

/** One valid value per ablation or diagnosis, each a run other than the method's. */
const VARIANTS: Record<string, string | number | boolean> = {
  ranking: 'voice',
  nVoice: 20,
  anchors: 2,
  anchorScope: 'layer',
  segmentFloor: 5,
  normalize: 'layer',
  scorePower: 0.5,
  maxRetention: 0.3,
  reserveSegments: 2,
  tidalSummaries: true,
  summaryMass: 0.5,
  summaryMassLayer: 1,
  fullLayer: 0,
  fullRole: 'tidal',
};

describe('WnW options: the method apart from its ablations and diagnoses', () => {
  const layout = makeLayout(4, 8, 400);
  const heads = syntheticHeads(layout, 3);

  it("splits today's keys without loss or overlap: at most 12 method options", () => {
    expect(WNW_OPTIONS.length).toBeLessThanOrEqual(12);
    const all = [...WNW_OPTIONS, ...WNW_ABLATIONS, ...WNW_DIAGNOSES];
    expect(new Set(all).size).toBe(all.length);
    expect([...all].sort()).toEqual([...BEFORE].sort());
    expect(Object.keys(VARIANTS).sort()).toEqual([...WNW_ABLATIONS, ...WNW_DIAGNOSES].sort());
    expect(WnwPolicy.options).toEqual(WNW_OPTIONS);
  });

  it('refuses an ablation or diagnosis given as a plain policy option, with a BAD_ARGUMENT that says where it goes', () => {
    for (const [key, value] of Object.entries(VARIANTS)) {
      for (const make of [
        () => createPolicy('wnw', { budget: 0.2, heads, [key]: value }),
        () => new WnwPolicy({ budget: 0.2, heads, [key]: value }),
        () => checkPolicyOptions('wnw', { [key]: value }),
      ]) {
        let err: unknown;
        try {
          make();
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(WnwError);
        expect((err as WnwError).code).toBe('BAD_ARGUMENT');
        expect((err as WnwError).message).toBe(
          `policy "wnw": option "${key}" is an ablation or diagnosis, for evaluation only (npm run eval -- --policies wnw:${key}=VALUE); policyOptions take the method's options: ${WNW_OPTIONS.join(', ')}`,
        );
      }
    }
    // The method's own options stay open to a caller.
    expect(() => createPolicy('wnw', { budget: 0.2, heads, selection: 'global', planLag: 1 })).not.toThrow();
  });

  it("the eval's policy spec still reaches every ablation and diagnosis", () => {
    const o = prefillObservation(layout, 2);
    // What a run decides at prefill: roles, retention, what it asks the runtime for, what each head keeps.
    const decisions = (p: WnwPolicy) => {
      const plan = p.prefill(o);
      return JSON.stringify([
        p.state,
        p.request(layout),
        plan.heads.map((h) => [h.gpu.length, h.cpu.length, h.summaries?.length ?? 0]),
        plan.fitting,
      ]);
    };
    const method = decisions(createPolicy('wnw', { budget: 0.4, heads }) as WnwPolicy);
    for (const [key, value] of Object.entries(VARIANTS)) {
      const spec = parsePolicySpec(`wnw:selection=segment:${key}=${String(value)}`);
      expect(spec.options).toEqual({ selection: 'segment', [key]: value });
      const opts = forEvaluation(spec.policy, spec.options);
      // The method's option stays a plain key; the ablation rides where only an evaluation puts it.
      expect(Object.keys(opts)).toEqual(['selection']);
      expect((opts as { [EVALUATION_OPTIONS]?: unknown })[EVALUATION_OPTIONS]).toEqual({ [key]: value });
      expect(decisions(createPolicy('wnw', { ...opts, budget: 0.4, heads }) as WnwPolicy), key).not.toBe(method);
    }
  });

  it('keeps the errors for bad values of an evaluation-only option', () => {
    const bad =
      (o: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      () =>
        new WnwPolicy({ budget: 0.2, heads, ...extra, ...ablate(o) });
    expect(bad({ ranking: 'vs' })).toThrow('option "ranking" must be "product", "voice" or "sensitivity", got vs');
    expect(bad({ nVoice: 0 })).toThrow('option "nVoice" must be a number >= 1, got 0');
    expect(bad({ anchorScope: 'head' })).toThrow('option "anchorScope" must be "all" or "layer", got head');
    expect(bad({ maxRetention: 1.5 })).toThrow('option "maxRetention" must be a number above 0 and at most 1, got 1.5');
    expect(bad({ scorePower: 0 })).toThrow('option "scorePower" must be a number above 0, got 0');
    expect(bad({ tidalSummaries: 'yes' })).toThrow('option "tidalSummaries" must be true or false, got yes');
    expect(bad({ tidalSummaries: true }, { summaries: false })).toThrow(
      'option "tidalSummaries" needs summaries (summaries=true)',
    );
    expect(bad({ summaryMass: 0.5 }, { summaryFit: 'value' })).toThrow(
      'option "summaryMass" shapes the count of summaryFit "mass", not "value"',
    );
    expect(bad({ summaryMassLayer: 4 })).toThrow('option "summaryMassLayer" must be a layer index below 4, got 4');
    expect(bad({ fullRole: 'voice' })).toThrow('option "fullRole" must be "anchor", "tidal" or "fixed", got voice');
    // A method option under the evaluation key, or an unknown one, is no ablation.
    expect(() => createPolicy('wnw', { budget: 0.2, heads, ...ablate({ planLag: 1 }) })).toThrow(
      /policy "wnw" has no ablation or diagnosis "planLag"/,
    );
    // A misspelt key in a spec names every option the spec may hold.
    expect(() => parsePolicySpec('wnw:rankng=voice')).toThrow(/has no option "rankng"; its options are .*ranking/);
  });

  it('calibrated roles apply unless an ablation (or a selection they were not made with) changes what they were made with', () => {
    const stored = heads.roles['0.2'];
    const changedBy = (method: Record<string, unknown>, variant: Record<string, unknown>) => {
      const o = parseWnwOptions({ budget: 0.2, ...method });
      return calibrationChangedBy(stored, heads, o, parseWnwAblations(variant, o, heads));
    };
    expect(changedBy({}, {})).toBeUndefined();
    expect(changedBy({ strictBudget: false, planLag: 1, summaries: true }, { reserveSegments: 2 })).toBeUndefined();
    expect(changedBy({}, { ranking: heads.ranking ?? 'product' })).toBeUndefined();
    expect(changedBy({ selection: 'global' }, {})).toBe('selection');
    for (const key of [
      'ranking',
      'nVoice',
      'anchors',
      'anchorScope',
      'segmentFloor',
      'normalize',
      'scorePower',
      'maxRetention',
    ])
      expect(changedBy({}, { [key]: VARIANTS[key] })).toBe(key);
    expect(changedBy({}, { segmentFloor: 1 })).toBe('segmentFloor');
    for (const key of ['tidalSummaries', 'summaryMass', 'summaryMassLayer', 'fullLayer', 'fullRole'])
      expect(changedBy({}, { [key]: VARIANTS[key] })).toBeUndefined();
  });
});
