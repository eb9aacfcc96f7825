/**
 * What the typed kernel calls share: a kernel's op owns its bindings, its uniform's layout
 * and the shape checks of what it is given, and answers a `Dispatch` (pipeline, bind
 * group, grid) the caller records now or replays every step. Binding numbers and uniform
 * fields are written in one place per kernel, next to the shader they mirror.
 */
import type { Bindings, GpuContext } from './device.js';

export type Binding = GPUBuffer | GPUBufferBinding;

export interface Dispatch {
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  x: number;
  y: number;
  z?: number;
  /** Split-K dispatches take the step's split count as y. */
  splitK?: boolean;
}

/** Makes (or shares) the uniform buffer of a dispatch; whoever passes it owns the buffers. */
export type UniformOf = (label: string, values: number[]) => GPUBuffer;

/**
 * Uniforms made once and shared by every dispatch that asks for the same values (they are
 * never written after creation); `keep` takes each new buffer, for its owner to destroy.
 */
export function sharedUniforms(ctx: GpuContext, keep: (b: GPUBuffer) => void): UniformOf {
  const made = new Map<string, GPUBuffer>();
  return (label, values) => {
    const key = values.join(',');
    let b = made.get(key);
    if (!b) {
      b = ctx.uniform(label, values);
      keep(b);
      made.set(key, b);
    }
    return b;
  };
}

/** Bytes a binding exposes to the shader. */
export function boundBytes(b: Binding): number {
  return 'buffer' in b ? (b.size ?? b.buffer.size - (b.offset ?? 0)) : b.size;
}

export function record(pass: GPUComputePassEncoder, d: Dispatch, y = d.y): void {
  pass.setPipeline(d.pipeline);
  pass.setBindGroup(0, d.bindGroup);
  pass.dispatchWorkgroups(d.x, y, d.z ?? 1);
}

/** A compiled kernel: binds what its subclass names and checks sizes before it does. */
export class Op {
  constructor(
    protected readonly ctx: GpuContext,
    readonly pipeline: GPUComputePipeline,
    readonly name: string,
  ) {}

  /** Throws when `binding` holds fewer than `bytes`: a wrong buffer fails here, named, not as garbage on the GPU. */
  protected need(what: string, binding: Binding, bytes: number): void {
    const has = boundBytes(binding);
    if (has < bytes) throw new RangeError(`${this.name}: ${what} binds ${has} bytes, the call needs ${bytes}`);
  }

  protected dispatch(entries: Bindings, x: number, y = 1, z = 1, splitK = false): Dispatch {
    return {
      pipeline: this.pipeline,
      bindGroup: this.ctx.bindGroup(this.pipeline, entries, this.name),
      x,
      y,
      z,
      splitK,
    };
  }
}
