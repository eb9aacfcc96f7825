/**
 * One GPU device for the browser (`navigator.gpu`) and Node (the `webgpu` package, Dawn),
 * with the adapter's maxima requested, loud typed errors (no adapter, out of memory via
 * error scopes, device loss), and counters of live buffers and created bind groups so a
 * test can assert that decode steps allocate nothing.
 */
import { DeviceLostError, NoWebGpuError, OutOfMemoryError } from '../errors.js';
import { isNode, nodeHost } from '../platform/host.js';

export interface GpuInfo {
  vendor: string;
  architecture: string;
  description: string;
  /** SwiftShader or another CPU rasteriser: timings are CPU timings. */
  software: boolean;
  features: string[];
  label: string;
}

export interface AcquireOptions {
  /** A GPU object to use (tests, embedding apps); default navigator.gpu, else Dawn through the Node entry. */
  gpu?: GPU;
  /** An existing device (e.g. onnxruntime-web's), so encoder outputs can stay on the GPU. */
  device?: GPUDevice;
  /** An adapter asked for earlier (its limits judged before the weights were read); default: request one. */
  adapter?: GPUAdapter;
  powerPreference?: GPUPowerPreference;
}

export type Bindings = (GPUBuffer | GPUBufferBinding)[] | Record<number, GPUBuffer | GPUBufferBinding>;

export class GpuContext {
  liveBuffers = 0;
  /** Bytes of the live buffers this context made, and their most since `resetPeak()`: the allocation tracker. */
  liveBytes = 0;
  peakBytes = 0;
  /** Destroying twice (a pool that took over buffers made earlier, on an error path) counts once. */
  private readonly destroyed = new WeakSet<GPUBuffer>();
  bindGroupsCreated = 0;
  lostReason: string | null = null;
  readonly limits: GPUSupportedLimits;

  constructor(
    readonly device: GPUDevice,
    readonly info: GpuInfo,
  ) {
    this.limits = device.limits;
    device.lost.then((l) => {
      this.lostReason = `${l.reason}: ${l.message}`;
    });
  }

  static async acquire(opts: AcquireOptions = {}): Promise<GpuContext> {
    if (opts.device) return new GpuContext(opts.device, describe(null, opts.device));
    const adapter = opts.adapter ?? (await requestGpuAdapter(opts));
    const want = [
      'maxStorageBufferBindingSize',
      'maxBufferSize',
      'maxStorageBuffersPerShaderStage',
      'maxComputeWorkgroupStorageSize',
      'maxComputeInvocationsPerWorkgroup',
      'maxComputeWorkgroupsPerDimension',
      'maxComputeWorkgroupSizeX',
      'maxComputeWorkgroupSizeY',
      'maxBindingsPerBindGroup',
    ] as const;
    const requiredLimits: Record<string, number> = {};
    for (const k of want) requiredLimits[k] = adapter.limits[k];
    const requiredFeatures = (['shader-f16'] as GPUFeatureName[]).filter((f) => adapter.features.has(f));
    let device: GPUDevice;
    try {
      device = await adapter.requestDevice({ requiredLimits, requiredFeatures });
    } catch (e) {
      throw new NoWebGpuError(`requestDevice failed: ${(e as Error).message}`);
    }
    return new GpuContext(device, describe(adapter, device));
  }

  /** Throws DeviceLostError once the device is gone. */
  check(): void {
    if (this.lostReason !== null) throw new DeviceLostError(this.lostReason);
  }

  buffer(
    label: string,
    size: number,
    usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
    data?: ArrayBufferView,
  ): GPUBuffer {
    const padded = Math.max(16, Math.ceil(size / 16) * 16);
    const b = this.device.createBuffer({ label, size: padded, usage, mappedAtCreation: data !== undefined });
    if (data) {
      new Uint8Array(b.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      b.unmap();
    }
    this.liveBuffers++;
    this.liveBytes += padded;
    this.peakBytes = Math.max(this.peakBytes, this.liveBytes);
    return b;
  }

  /** Starts a new peak from the bytes live now. */
  resetPeak(): void {
    this.peakBytes = this.liveBytes;
  }

  uniform(label: string, values: ArrayLike<number>): GPUBuffer {
    return this.buffer(
      label,
      values.length * 4,
      GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      Uint32Array.from(values),
    );
  }

  destroy(b: GPUBuffer | undefined | null): void {
    if (!b || this.destroyed.has(b)) return;
    this.destroyed.add(b);
    b.destroy();
    this.liveBuffers--;
    this.liveBytes -= b.size;
  }

  /** Group 0 of `pipeline`; an array binds 0..n-1, an object names sparse binding numbers. */
  bindGroup(pipeline: GPUComputePipeline, resources: Bindings, label?: string): GPUBindGroup {
    this.bindGroupsCreated++;
    return this.device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: Object.entries(resources).map(([i, r]) => ({
        binding: Number(i),
        resource: 'buffer' in r ? r : { buffer: r },
      })),
    });
  }

  /**
   * Runs allocations inside out-of-memory and validation error scopes, so a failed
   * allocation is an OutOfMemoryError naming what and how much, not a silent zero buffer.
   */
  async allocating<T>(what: string, bytes: number, fn: () => T): Promise<T> {
    this.check();
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    let out: T;
    let validation: GPUError | null = null;
    let oom: GPUError | null = null;
    try {
      out = fn();
    } finally {
      validation = await this.device.popErrorScope();
      oom = await this.device.popErrorScope();
    }
    if (oom) throw new OutOfMemoryError(what, bytes);
    if (validation) throw new Error(`allocating ${what}: ${validation.message}`);
    return out;
  }
}

/**
 * The adapter alone, without a device: its limits can be judged (src/backend/webgpu/fit.ts)
 * before any weight is read, and `acquire({ adapter })` makes the device from it later.
 */
export async function requestGpuAdapter(
  opts: Pick<AcquireOptions, 'gpu' | 'powerPreference'> = {},
): Promise<GPUAdapter> {
  let gpu: GPU | null = opts.gpu ?? (typeof navigator !== 'undefined' && navigator.gpu ? navigator.gpu : null);
  // Dawn says itself why it cannot be had (not installed, no driver, a software adapter, a crash in its probe).
  if (!gpu && isNode()) gpu = await nodeHost('WebGPU').gpu();
  if (!gpu) throw new NoWebGpuError('navigator.gpu is missing');
  const adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference ?? 'high-performance' });
  if (!adapter) throw new NoWebGpuError('requestAdapter() returned no adapter');
  return adapter;
}

/** Who made the adapter, and whether it is a CPU rasteriser. */
export function describeAdapter(
  adapter: GPUAdapter | null,
  device?: GPUDevice,
): Omit<GpuInfo, 'features'> & { name: string } {
  const info =
    (adapter as (GPUAdapter & { info?: GPUAdapterInfo }) | null)?.info ??
    (device as (GPUDevice & { adapterInfo?: GPUAdapterInfo }) | undefined)?.adapterInfo;
  const vendor = info?.vendor ?? '';
  const architecture = info?.architecture ?? '';
  const description = info?.description ?? '';
  const all = `${vendor} ${architecture} ${description}`.toLowerCase();
  const software =
    all.includes('swiftshader') ||
    all.includes('llvmpipe') ||
    all.includes('lavapipe') ||
    (info as { isFallbackAdapter?: boolean } | undefined)?.isFallbackAdapter === true;
  const name = [vendor, architecture, description].filter(Boolean).join(' ') || 'unknown adapter';
  return {
    vendor,
    architecture,
    description,
    software,
    name,
    label: software ? `WebGPU (${name}: a CPU rasteriser, timings are CPU timings)` : `WebGPU (${name})`,
  };
}

function describe(adapter: GPUAdapter | null, device: GPUDevice): GpuInfo {
  return { ...describeAdapter(adapter, device), features: [...device.features].map(String) };
}
