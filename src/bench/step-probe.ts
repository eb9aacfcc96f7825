/**
 * Counts and times what the page asks of WebGPU during decode steps, without a counter in
 * the runtime: the bench wraps the device and its queue (own properties shadowing the
 * prototype's methods), and the buffers' and encoders' classes once (their prototypes'
 * `mapAsync` and `finish`), before a session is opened, so every buffer, bind group, write,
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

  /** Per open encoder: when it was made and the staging time by then. */
  private readonly open = new WeakMap<object, { t0: number; staged: number }>();
  /** The objects (prototypes, or a stand-in's own objects) whose method is wrapped already, per method. */
  private readonly wrapped = new Map<string, Set<object>>();

  constructor(device: GPUDevice) {
    const q = device.queue;
    const self = this;
    const mapAsync = (orig: (...a: unknown[]) => unknown) =>
      function (this: GPUBuffer, ...args: Parameters<GPUBuffer['mapAsync']>) {
        self.counts.mapAsync++;
        // The step writes' upload is mapped for writing: only reads are a step's readback.
        if (!(args[0] & GPUMapMode.READ)) return orig.apply(this, args);
        const entry = { at: NaN };
        self.maps.push(entry);
        return (orig.apply(this, args) as Promise<undefined>).then(() => {
          entry.at = now();
          return undefined;
        });
      };
    const finish = (orig: (...a: unknown[]) => unknown) =>
      function (this: GPUCommandEncoder, fd?: GPUCommandBufferDescriptor) {
        const cb = orig.call(this, fd);
        const o = self.open.get(this);
        if (o) {
          self.open.delete(this);
          self.openEncoders--;
          self.times.encoding += now() - o.t0 - (self.times.staging - o.staged);
        }
        return cb;
      };
    this.wrap(
      device,
      'createBuffer',
      (orig) =>
        function (this: GPUDevice, d: GPUBufferDescriptor) {
          self.counts.createBuffer++;
          const b = orig.call(this, d) as GPUBuffer;
          // The readback ring's slots are made after the probe (the session's open): their
          // class's method is wrapped once, at the first buffer, not buffer by buffer.
          self.wrapOnce(b, 'mapAsync', mapAsync);
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
          const enc = orig.call(this, d) as GPUCommandEncoder;
          self.wrapOnce(enc, 'finish', finish);
          self.open.set(enc, { t0, staged: self.times.staging });
          self.openEncoders++;
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

  /**
   * Wraps `key` where `obj` finds it: its class's prototype (a browser's or Dawn's objects),
   * once for every object of the class, or `obj` itself where it holds the method (a stand-in).
   * Setting a method on each native object would change its shape every step, at a cost the
   * bench would count as host time.
   */
  private wrapOnce(obj: object, key: string, make: (orig: (...a: unknown[]) => unknown) => unknown): void {
    let owner: object | null = obj;
    while (owner && !Object.prototype.hasOwnProperty.call(owner, key)) owner = Object.getPrototypeOf(owner);
    if (!owner || owner === Object.prototype) return;
    const done = this.wrapped.get(key) ?? new Set<object>();
    this.wrapped.set(key, done);
    if (done.has(owner)) return;
    done.add(owner);
    this.wrap(owner as Record<string, unknown>, key, make);
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

  /** The device, its queue and the classes' methods as they were. */
  detach(): void {
    for (const r of this.restore.splice(0).reverse()) r();
    this.wrapped.clear();
  }
}
