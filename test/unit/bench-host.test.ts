import { describe, expect, it } from 'vitest';
import { parseHostBenchArgs } from '../../src/bench/host-main.js';
import { AUDIO_PER_STEP, recallCopyMs, syntheticObservation, syntheticRows } from '../../src/bench/host.js';
import { audioStart } from '../../src/model/config.js';
import { rope, ropeFrequencies } from '../../src/reference/ops.js';
import { StepProbe } from '../../src/bench/step-probe.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { standInPolicy, type StandInRequest } from '../../src/bench/host-cpu.js';

(globalThis as { GPUMapMode?: unknown }).GPUMapMode ??= { READ: 1, WRITE: 2 };

/** A device whose calls do nothing: what the probe wraps and counts. */
function fakeDevice() {
  const queue = { writeBuffer: () => undefined, submit: () => undefined };
  let resolveMap: () => void = () => {};
  const device = {
    queue,
    createBuffer: () => ({ mapAsync: () => new Promise<void>((r) => (resolveMap = r)) }),
    createBindGroup: () => ({}),
    createCommandEncoder: () => ({ finish: () => ({}) }),
  };
  return { device: device as unknown as GPUDevice, resolve: () => resolveMap() };
}

describe('host-time bench', () => {
  it('parses its arguments: every layer of Voxtral-Mini-3B at 30 minutes by default', () => {
    expect(parseHostBenchArgs(['--host'])).toMatchObject({
      shape: 'voxtral-mini-3b',
      layers: 30,
      minutes: [30],
      steps: 16,
      bandwidthGBs: 300,
      backends: ['node', 'chromium'],
      kv: 'f32',
      json: false,
    });
    expect(parseHostBenchArgs(['--layers', '2', '--minutes', '1,5', '--json'])).toMatchObject({
      layers: 2,
      minutes: [1, 5],
      json: true,
    });
    expect(() => parseHostBenchArgs(['--layers', '31'])).toThrow(/--layers/);
    expect(() => parseHostBenchArgs(['--backends', 'cpu'])).toThrow(/--backends/);
    expect(parseHostBenchArgs(['--policies', 'wnw,quest']).policies).toEqual(['wnw', 'quest']);
    expect(parseHostBenchArgs(['--host']).policies).toBeUndefined();
    expect(() => parseHostBenchArgs(['--policies', 'h2o'])).toThrow(/--policies/);
  });

  it('takes the stand-in run: caches left alone and evicted by default, a stand-in chunk choice only policies it can drive', () => {
    expect(parseHostBenchArgs(['--host']).standIn).toBeUndefined();
    expect(parseHostBenchArgs(['--host', '--stand-in']).standIn).toEqual({ evictMiB: [0, 512], segmentsPerStep: 2 });
    expect(parseHostBenchArgs(['--stand-in', '--evict-mib', '64', '--segments-per-step', '1']).standIn).toEqual({
      evictMiB: [64],
      segmentsPerStep: 1,
    });
    expect(() => parseHostBenchArgs(['--stand-in', '--evict-mib', '-1'])).toThrow(/--evict-mib/);
    expect(() => parseHostBenchArgs(['--stand-in', '--policies', 'quest'])).toThrow(/only a device computes/);
    expect(parseHostBenchArgs(['--policies', 'quest']).policies).toEqual(['quest']);
  });

  it("runs a step's JavaScript over a stand-in device: WnW recalls and stages rows as its chunk choice moves, the full cache none", async () => {
    const req: StandInRequest = {
      shape: 'voxtral-mini-3b',
      layers: 2,
      minutes: [1],
      steps: 4,
      kv: 'f16',
      bandwidthGBs: 300,
      evictMiB: [0],
      segmentsPerStep: 2,
    };
    const wnw = await standInPolicy(req, 1, 'wnw', 0.2, 1, 'Node');
    expect(wnw).toMatchObject({ policy: 'wnw', layers: 2, steps: 4, evictMiB: 1, audioTokens: 750 });
    expect(wnw.recalledPerStep).toBeGreaterThan(0);
    // The step's writes: its upload's index and data copied into the landing buffer, one scatter (one shard).
    expect(wnw.copiesPerStep).toBe(2);
    expect(wnw.dispatchesPerStep).toBe(1);
    for (const v of Object.values(wnw.ms.medianByPhase)) expect(v).toBeGreaterThanOrEqual(0);
    expect(wnw.ms.min).toBeLessThanOrEqual(wnw.ms.median);
    const still = await standInPolicy({ ...req, segmentsPerStep: 0 }, 1, 'wnw', 0.2, 0, 'Node');
    expect(still.recalledPerStep).toBe(0);
    const full = await standInPolicy(req, 1, 'full', 1, 0, 'Node');
    expect(full.recalledPerStep).toBe(0);
  });

  it('counts the device calls it wraps, times each map, and leaves the device as it was', async () => {
    const { device, resolve } = fakeDevice();
    const own = Object.keys(device).sort();
    const probe = new StepProbe(device);
    const b = device.createBuffer({ size: 4, usage: 0 });
    device.createBindGroup({} as GPUBindGroupDescriptor);
    device.queue.writeBuffer({} as GPUBuffer, 0, new Uint8Array(4));
    const enc = device.createCommandEncoder();
    // A write while an encoder is open is the step's staged upload.
    device.queue.writeBuffer({} as GPUBuffer, 0, new Uint8Array(4));
    device.queue.submit([enc.finish()]);
    const mapped = b.mapAsync(1);
    expect(probe.snapshot().counts).toEqual({ writeBuffer: 2, createBindGroup: 1, createBuffer: 1, mapAsync: 1 });
    expect(probe.takeMap()).toBeNaN();
    // The staged rows' upload, mapped for writing: counted, but no step's readback.
    void b.mapAsync(2);
    const again = b.mapAsync(1);
    resolve();
    await again;
    expect(probe.snapshot().counts.mapAsync).toBe(3);
    expect(probe.takeMap()).toBeGreaterThan(0);
    void mapped;
    probe.detach();
    expect(Object.keys(device).sort()).toEqual(own);
    device.queue.writeBuffer({} as GPUBuffer, 0, new Uint8Array(4));
    expect(probe.snapshot().counts.writeBuffer).toBe(2);
  });

  it("times the copy of a step's recalled bytes as a least time, one run at least", () => {
    for (const bytes of [0, 1000, 64 * 1024]) {
      const ms = recallCopyMs(bytes, 4096, 3, 2 ** 20);
      expect(Number.isFinite(ms)).toBe(true);
      expect(ms).toBeGreaterThanOrEqual(0);
    }
  });

  it('makes a seeded prefill observation with keys only where asked', () => {
    const c = shapeConfig('voxtral-mini-3b', 2);
    const layout = policyLayout(c, 100);
    const a = syntheticObservation(layout, false, 3);
    expect(a.scores).toHaveLength(2 * c.numKvHeads);
    expect(a.scores[0]).toHaveLength(100);
    expect(a.keys).toBeUndefined();
    const b = syntheticObservation(layout, true, 3);
    expect(b.scores[5]).toEqual(a.scores[5]);
    expect(b.keys![0]).toHaveLength(100 * c.headDim);
  });

  it("moves the anchors' attention on by the pace each step, whatever the query", () => {
    const c = shapeConfig('voxtral-mini-3b', 2);
    const d = c.headDim;
    const A = 200;
    const anchor = 3;
    const rows = syntheticRows(c, A, 19, [anchor]);
    const a0 = audioStart(c);
    const keys = (head: number) => {
      const k = new Float32Array(A * d);
      const v = new Float32Array(d);
      for (let a = 0; a < A; a++) rows(head, a0 + a, k, a * d, v, 0);
      return k;
    };
    const freqs = ropeFrequencies(d, c.ropeTheta);
    const q0 = Float32Array.from({ length: d }, (_, i) => Math.sin(i * 1.7) + 0.3);
    // The scores of a query at decode position p over the audio, and where they peak.
    const scores = (k: Float32Array, p: number) => {
      const q = Float32Array.from(q0);
      rope(q, 0, 1, d, p, freqs);
      return Array.from({ length: A }, (_, a) => q.reduce((s, x, i) => s + x * k[a * d + i], 0));
    };
    const peak = (s: number[]) => s.indexOf(Math.max(...s.slice(20, A - 20)));
    const k = keys(anchor);
    const p = a0 + A + 40;
    const s0 = scores(k, p);
    const s1 = scores(k, p + 1);
    for (let a = 0; a + AUDIO_PER_STEP < A; a++) expect(s1[a + AUDIO_PER_STEP]).toBeCloseTo(s0[a], 3);
    expect(peak(s1)).not.toBe(peak(s0));
    // Other heads keep the seeded table: no pace in their scores.
    const other = keys(anchor + 1);
    expect(scores(other, p + 1)[AUDIO_PER_STEP]).not.toBeCloseTo(scores(other, p)[0], 3);
  });
});
