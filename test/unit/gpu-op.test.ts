import { describe, expect, it } from 'vitest';
import type { GpuContext } from '../../src/gpu/device.js';
import { sharedUniforms } from '../../src/gpu/op.js';
import { RmsNorm } from '../../src/backend/webgpu/ops.js';
import type { ModelConfig } from '../../src/model/config.js';

/** A context that records what it is asked to make, without a device. */
function fakeContext() {
  const made: { label: string; values: number[] }[] = [];
  const groups: unknown[] = [];
  const ctx = {
    uniform: (label: string, values: ArrayLike<number>) => {
      made.push({ label, values: Array.from(values) });
      return { size: values.length * 4 } as unknown as GPUBuffer;
    },
    bindGroup: (_p: GPUComputePipeline, entries: unknown) => {
      groups.push(entries);
      return {} as GPUBindGroup;
    },
  } as unknown as GpuContext;
  return { ctx, made, groups };
}

const buffer = (size: number) => ({ size }) as unknown as GPUBuffer;

describe('typed kernel ops', () => {
  it('share one uniform buffer between dispatches that ask for the same values', () => {
    const { ctx, made } = fakeContext();
    const kept: GPUBuffer[] = [];
    const u = sharedUniforms(ctx, (b) => kept.push(b));
    const a = u('a', [1, 0, 0, 0]);
    expect(u('b', [1, 0, 0, 0])).toBe(a);
    expect(u('c', [2, 0, 0, 0])).not.toBe(a);
    expect(made.length).toBe(2);
    expect(kept.length).toBe(2);
  });

  it('bind named buffers in the shader order and refuse a buffer too small, by name', () => {
    const { ctx, groups } = fakeContext();
    const norm = new RmsNorm(ctx, {} as GPUComputePipeline, { hiddenSize: 8 } as ModelConfig);
    const u = sharedUniforms(ctx, () => {});
    const [x, w, y] = [buffer(4 * 8 * 3), buffer(4 * 8), buffer(4 * 8)];
    const d = norm.run({ x, w, y }, { rows: 1, inRow0: 2 }, u);
    expect(d.x).toBe(1);
    expect((groups[0] as unknown[]).slice(0, 3)).toEqual([x, w, y]);
    expect(() => norm.run({ x, w, y }, { rows: 2 }, u)).toThrow(/rmsnorm: y binds 32 bytes, the call needs 64/);
  });
});
