import { describe, expect, it } from 'vitest';
import { kvHeadCount } from '../../src/model/config.js';
import { referenceConfig } from '../../src/model/testing.js';
import { fitVerdict, fullKvBytes } from '../../src/ui/model-fit.js';

const GiB = 2 ** 30;

describe('the model panel\'s fit verdict', () => {
  it('counts a full KV cache per (layer, KV head) slot for audio plus text', () => {
    const c = referenceConfig();
    const slots = Math.ceil(10 * c.audio.tokensPerSecond) + 256;
    // f32 keys and values plus a 4-byte position per slot; f16 halves keys and values only.
    expect(fullKvBytes(c, 10, 'f32')).toBe(kvHeadCount(c) * slots * (2 * c.headDim * 4 + 4));
    expect(fullKvBytes(c, 10, 'f16')).toBe(kvHeadCount(c) * slots * (2 * c.headDim * 2 + 4));
  });

  it('fits within the memory the device reports', () => {
    const v = fitVerdict(3 * GiB, 0.5 * GiB, 4);
    expect(v.fits).toBe(true);
    expect(v.needBytes).toBe(3.5 * GiB);
  });

  it('does not fit when the need is at least twice a value below the browsers\' cap, and says what to do', () => {
    const v = fitVerdict(7 * GiB, 1 * GiB, 4);
    expect(v.fits).toBe(false);
    expect(v.text).toMatch(/more than this device has/);
    expect(v.text).toMatch(/--quant q4/);
  });

  it('leaves the verdict open where the reported value cannot decide', () => {
    // Rounded down: 4 GiB reported may be up to 8 GiB.
    expect(fitVerdict(5 * GiB, 0, 4).fits).toBeNull();
    // At the cap the device may have any amount more.
    expect(fitVerdict(40 * GiB, 0, 8).fits).toBeNull();
    expect(fitVerdict(1 * GiB, 0, undefined).fits).toBeNull();
    expect(fitVerdict(1 * GiB, 0, undefined).text).toMatch(/does not say/);
  });
});
