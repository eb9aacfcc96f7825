import { describe, expect, it } from 'vitest';
import { planMemory } from '../../src/backend/webgpu/fit.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { referenceConfig } from '../../src/model/testing.js';
import { clipFit, type ModelSummary } from '../../src/ui/model-fit.js';

const MiB = 2 ** 20;
const summary = (over: Partial<ModelSummary> = {}): ModelSummary => {
  const config = referenceConfig();
  return { family: 'wnw (own layout)', config, weightFormat: 'f32', weightBytes: decoderWeightBytes(config, 'f32').total, tied: false, ...over };
};

describe("the model panel's fit verdict", () => {
  it("is the loader's plan for the clip's audio tokens: weights + buffers + the run's KV pool", () => {
    const s = summary();
    const v = clipFit(s, { seconds: 60, kvPrecision: 'f16', budget: 1 }, { limits: null, deviceMemoryGiB: 4 });
    const plan = planMemory(s.config, { weightFormat: 'f32', tied: false, audioTokens: Math.ceil(60 * s.config.audio.tokensPerSecond), kvPrecision: 'f16', budget: 1 });
    expect(v.plan).toEqual(plan);
    expect(v.fits).toBe(true);
    expect(v.text).toMatch(/^Needs .* of f32 weights \+ .* of prefill and decode buffers \+ .* of KV pool \(full cache\) = .*; fits the 4 GiB/);
    // WnW at 0.2 plans a smaller pool for a long clip.
    const wnw = clipFit(s, { seconds: 1800, kvPrecision: 'f16', budget: 0.2 }, { limits: null });
    const full = clipFit(s, { seconds: 1800, kvPrecision: 'f16', budget: 1 }, { limits: null });
    expect(wnw.plan!.poolBytes).toBeLessThan(full.plan!.poolBytes / 2);
    expect(wnw.text).toMatch(/KV pool \(r_GPU 0\.2\)/);
  });

  it('says which adapter limit fails and what to do', () => {
    const s = summary();
    // A reference-model layer matrix is well under 1 MiB in f32; a 64 KiB binding holds none of the large ones.
    const v = clipFit(s, { seconds: 10, kvPrecision: 'f32', budget: 1 }, { limits: { maxStorageBufferBindingSize: 64 * 1024, maxBufferSize: 256 * MiB } });
    expect(v.fits).toBe(false);
    expect(v.problems[0].limit).toBe('maxStorageBufferBindingSize');
    expect(v.text).toMatch(/does not fit\. layers\.\*\.\w+ \(f32, \d+ × \d+\) needs .* over this device's maxStorageBufferBindingSize/);
    // The CPU backend binds nothing: the same model is judged on memory alone.
    expect(clipFit(s, { seconds: 10, kvPrecision: 'f32', budget: 1 }, { limits: null }).fits).toBeNull();
  });
});
