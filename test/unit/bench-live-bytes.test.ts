import { describe, expect, it } from 'vitest';
import { countLiveBytes } from '../../src/bench/live-bytes.js';
import { deviation, measuredMarkdown, type MeasuredRow } from '../../src/bench/memory-measure.js';

/** A device whose buffers are plain objects: enough for the hook, which wraps createBuffer and destroy. */
function fakeDevice(): GPUDevice {
  return {
    createBuffer: (d: GPUBufferDescriptor) => ({ size: d.size, destroy: () => undefined }),
  } as unknown as GPUDevice;
}

describe('live GPU bytes (bench --memory --measure)', () => {
  it('counts every buffer from creation to destroy, and the peak per phase', () => {
    const device = fakeDevice();
    const hook = countLiveBytes(device);
    const a = device.createBuffer({ size: 100, usage: 0 });
    const b = device.createBuffer({ size: 50, usage: 0 });
    expect([hook.live, hook.peak]).toEqual([150, 150]);
    a.destroy();
    a.destroy(); // twice: counted once
    expect([hook.live, hook.peak]).toEqual([50, 150]);
    hook.resetPeak();
    const c = device.createBuffer({ size: 30, usage: 0 });
    expect([hook.live, hook.peak]).toEqual([80, 80]);
    hook.stop();
    device.createBuffer({ size: 1000, usage: 0 });
    expect(hook.live).toBe(80);
    b.destroy();
    c.destroy();
    expect(hook.live).toBe(0);
  });

  it('sets the measured peak against the modelled one, phase by phase', () => {
    const row: MeasuredRow = {
      layers: 1,
      audioTokens: 375,
      steps: 8,
      adapter: 'test',
      measured: { encode: 700, prefill: 1010, decode: 900 },
      modelled: { encode: 800, prefill: 1000, decode: 950 },
      weightBytes: 500,
    };
    const d = deviation(row);
    expect(d.encode).toBeCloseTo(0.125, 10);
    expect(d.prefill).toBeCloseTo(0.01, 10);
    expect(d.decode).toBeCloseTo(50 / 950, 10);
    expect(d.peak).toBeCloseTo(0.01, 10);
    expect(measuredMarkdown([row])).toContain('| 1 | 375 | 8 | 0.0 / 0.0 | 0.0 / 0.0 | 0.0 / 0.0 | 1.00 % |');
    // Where encoding is the larger phase, the peak is set against it.
    expect(
      deviation({ ...row, measured: { ...row.measured, encode: 2200 }, modelled: { ...row.modelled, encode: 2000 } })
        .peak,
    ).toBeCloseTo(0.1, 10);
  });
});
