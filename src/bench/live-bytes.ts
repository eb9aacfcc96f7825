/**
 * A createBuffer/destroy hook on a GPUDevice: the bytes of every buffer alive, and their
 * peak, whoever made them (the backend's GpuContext, a pipeline cache, staging for a
 * readback), so the sizing can be held against what the code really allocates.
 */
export interface LiveBytes {
  readonly live: number;
  readonly peak: number;
  /** Starts a new phase: the peak from here on. */
  resetPeak(): void;
  /** Takes the hook off the device. */
  stop(): void;
}

export function countLiveBytes(device: GPUDevice): LiveBytes {
  const create = device.createBuffer;
  const sizes = new Map<GPUBuffer, number>();
  let live = 0;
  let peak = 0;
  device.createBuffer = function (desc: GPUBufferDescriptor): GPUBuffer {
    const b = create.call(device, desc);
    sizes.set(b, b.size);
    live += b.size;
    peak = Math.max(peak, live);
    const destroy = b.destroy;
    b.destroy = function (): undefined {
      const n = sizes.get(b);
      if (n !== undefined) {
        live -= n;
        sizes.delete(b);
      }
      return destroy.call(b);
    };
    return b;
  };
  return {
    get live() {
      return live;
    },
    get peak() {
      return peak;
    },
    resetPeak() {
      peak = live;
    },
    stop() {
      device.createBuffer = create;
    },
  };
}
