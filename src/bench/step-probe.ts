/**
 * Counts and times what the page asks of WebGPU during decode steps, without a counter in
 * the runtime: the bench wraps the device and its queue (own properties shadowing the
 * prototype's methods) before a session is opened, so every buffer, bind group, write,
 * encoder, submit and map of the session goes through here. Each call is timed where it
 * names a phase of the step: encoding (from `createCommandEncoder` to `finish` returning,
 * less the writes inside it), staging (writes while an encoder is open: rows the step's
 * mapped upload could not take), submit (`queue.submit`), and the moment each readback
 * (READ) map resolves, so the read's wait for the GPU can be left out of host time.
 */

export interface CallCounts {
  writeBuffer: number;
  createBindGroup: number;
  createBuffer: number;
  mapAsync: number;
}

export interface ProbeTimes {
  encoding: number;
  staging: number;
  submit: number;
}

const now = () => performance.now();

export class StepProbe {
  readonly counts: CallCounts = { writeBuffer: 0, createBindGroup: 0, createBuffer: 0, mapAsync: 0 };
  readonly times: ProbeTimes = { encoding: 0, staging: 0, submit: 0 };
  /** When each map asked since the last `takeMap` resolved (NaN until it has), oldest first. */
  private readonly maps: { at: number }[] = [];
  private openEncoders = 0;
  private readonly restore: (() => void)[] = [];

  constructor(device: GPUDevice) {
    const q = device.queue;
    const self = this;
    this.wrap(
      device,
      'createBuffer',
      (orig) =>
        function (this: GPUDevice, d: GPUBufferDescriptor) {
          self.counts.createBuffer++;
          const b = orig.call(this, d) as GPUBuffer;
          const map = b.mapAsync;
          // Per buffer: the readback ring's slots are made after the probe (the session's open).
          b.mapAsync = function (this: GPUBuffer, ...args: Parameters<GPUBuffer['mapAsync']>) {
            self.counts.mapAsync++;
            // The staged rows' upload is mapped for writing: only reads are a step's readback.
            if (!(args[0] & GPUMapMode.READ)) return map.apply(this, args);
            const entry = { at: NaN };
            self.maps.push(entry);
            return map.apply(this, args).then(() => {
              entry.at = now();
              return undefined;
            });
          };
          return b;
        },
    );
    this.wrap(
      device,
      'createBindGroup',
      (orig) =>
        function (this: GPUDevice, d: GPUBindGroupDescriptor) {
          self.counts.createBindGroup++;
          return orig.call(this, d);
        },
    );
    this.wrap(
      device,
      'createCommandEncoder',
      (orig) =>
        function (this: GPUDevice, d?: GPUCommandEncoderDescriptor) {
          const t0 = now();
          const stagedBefore = self.times.staging;
          const enc = orig.call(this, d) as GPUCommandEncoder;
          self.openEncoders++;
          const finish = enc.finish;
          enc.finish = function (this: GPUCommandEncoder, fd?: GPUCommandBufferDescriptor) {
            const cb = finish.call(this, fd);
            self.openEncoders--;
            self.times.encoding += now() - t0 - (self.times.staging - stagedBefore);
            return cb;
          };
          return enc;
        },
    );
    this.wrap(
      q,
      'writeBuffer',
      (orig) =>
        function (this: GPUQueue, ...args: unknown[]) {
          self.counts.writeBuffer++;
          if (!self.openEncoders) return orig.apply(this, args);
          const t0 = now();
          const r = orig.apply(this, args);
          self.times.staging += now() - t0;
          return r;
        },
    );
    this.wrap(
      q,
      'submit',
      (orig) =>
        function (this: GPUQueue, ...args: unknown[]) {
          const t0 = now();
          const r = orig.apply(this, args);
          self.times.submit += now() - t0;
          return r;
        },
    );
  }

  private wrap<T extends object, K extends keyof T & string>(
    target: T,
    key: K,
    make: (orig: (...a: unknown[]) => unknown) => unknown,
  ): void {
    const orig = target[key] as unknown as (...a: unknown[]) => unknown;
    const own = Object.prototype.hasOwnProperty.call(target, key);
    (target as Record<string, unknown>)[key] = make(orig);
    this.restore.push(() => {
      if (own) (target as Record<string, unknown>)[key] = orig;
      else delete (target as Record<string, unknown>)[key];
    });
  }

  /** A copy of the counts and times so far (subtract two to get a step's). */
  snapshot(): { counts: CallCounts; times: ProbeTimes } {
    return { counts: { ...this.counts }, times: { ...this.times } };
  }

  /** When the oldest map not yet taken resolved (NaN: not yet, or none asked). */
  takeMap(): number {
    return this.maps.shift()?.at ?? NaN;
  }

  /** Forgets maps asked so far (those of the prefill and placement). */
  clearMaps(): void {
    this.maps.length = 0;
  }

  /** The device and queue as they were. */
  detach(): void {
    for (const r of this.restore.splice(0).reverse()) r();
  }
}
