/**
 * A createBuffer/destroy hook on a GPUDevice: the bytes of every buffer alive, and their
 * peak, whoever made them (the backend's GpuContext, a pipeline cache, staging for a
 * readback), so the sizing can be held against what the code really allocates.
 * `countLiveBuffersEverywhere` puts the same hook on GPUDevice.prototype, so every device
 * of the realm is counted, one made later included (the soak and the cancel tests: a
 * buffer that is never destroyed stays counted, whichever device it was on).
 */
export interface LiveBytes {
  readonly live: number;
  /** Buffers alive (made and not yet destroyed). */
  readonly buffers: number;
  readonly peak: number;
  /** The live buffers by label ('' for unlabelled): what a leak is made of. */
  byLabel(): Record<string, { buffers: number; bytes: number }>;
  /** Starts a new phase: the peak from here on. */
  resetPeak(): void;
  /** Takes the hook off the device. */
  stop(): void;
}

interface Owner {
  createBuffer(desc: GPUBufferDescriptor): GPUBuffer;
}

function hook(owner: Owner, restore: (create: Owner['createBuffer']) => void): LiveBytes {
  const create = owner.createBuffer;
  const sizes = new Map<GPUBuffer, number>();
  let live = 0;
  let peak = 0;
  owner.createBuffer = function (this: GPUDevice, desc: GPUBufferDescriptor): GPUBuffer {
    const b = create.call(this, desc);
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
    get buffers() {
      return sizes.size;
    },
    get peak() {
      return peak;
    },
    byLabel() {
      const out: Record<string, { buffers: number; bytes: number }> = {};
      for (const [b, n] of sizes) {
        const e = (out[b.label] ??= { buffers: 0, bytes: 0 });
        e.buffers++;
        e.bytes += n;
      }
      return out;
    },
    resetPeak() {
      peak = live;
    },
    stop() {
      restore(create);
    },
  };
}

export function countLiveBytes(device: GPUDevice): LiveBytes {
  return hook(device, (create) => void (device.createBuffer = create));
}

let everywhere: LiveBytes | null = null;

/** The hook on every GPUDevice of this realm; installed once, later calls return the same counter. */
export function countLiveBuffersEverywhere(): LiveBytes {
  if (everywhere) return everywhere;
  const proto = (globalThis as unknown as { GPUDevice: { prototype: Owner } }).GPUDevice.prototype;
  everywhere = hook(proto, (create) => {
    proto.createBuffer = create;
    everywhere = null;
  });
  return everywhere;
}
