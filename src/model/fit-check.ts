/**
 * "Will this recording fit this device?" for a folder `inspectModel` read: the decoder's
 * weights in the format the load will store, the audio tower where it runs on the GPU, and
 * the KV plan of the policy's budget for the recording's audio tokens, against the WebGPU
 * adapter's limits and the memory the browser reports. The judgement is the loader's own
 * (src/backend/webgpu/fit.ts), so a page's answer and a load's refusal agree.
 */
import {
  audioTokensOf,
  checkFit as judgeFit,
  maxAudioTokens,
  reportedDeviceMemoryGiB,
  sureMemoryBytes,
  type DeviceLimits,
  type FitDevice,
  type FitVerdict,
} from '../backend/webgpu/fit.js';
import { defaultTowerFormat } from '../encoder/sizing.js';
import { PositionsExceededError, WnwError } from '../errors.js';
import type { KvPrecision } from '../kv/precision.js';
import { policyBudget, type PolicyName } from '../policy/registry.js';
import { promptLength } from './config.js';
import type { ModelSizing, ModelSummary } from './inspect.js';
import type { WeightFormat } from './quant.js';

export interface ClipContext {
  seconds: number;
  kvPrecision: KvPrecision;
  /** r_GPU of the run's policy; 1 for the full cache. */
  budget: number;
  /** The folder has no heads.json: the verdict covers the head triage the page would run first. */
  triage?: boolean;
}

/**
 * The verdict for a clip on this device: the model's weights in their format plus the KV
 * plan for the clip's audio tokens (src/backend/webgpu/fit.ts), against the WebGPU
 * adapter's limits (null where the CPU backend runs) and the memory the browser reports.
 */
export function clipFit(s: ModelSizing, clip: ClipContext, device: FitDevice): FitVerdict {
  const audioTokens = audioTokensOf(s.config, clip.seconds);
  // The tower runs on the GPU only beside the WebGPU decoder, in the format the route would choose.
  const towerOf = device.limits ? s.audioTower : undefined;
  const format =
    towerOf &&
    defaultTowerFormat(
      s.weightFormat,
      (f) => s.weightBytes + towerOf(f).weightBytes + towerOf(f).batchBytes,
      sureMemoryBytes(device),
    ).format;
  const audioTower = towerOf && format ? towerOf(format) : undefined;
  return judgeFit(
    s.config,
    {
      weightFormat: s.weightFormat,
      tied: s.tied,
      audioTokens,
      kvPrecision: clip.kvPrecision,
      budget: clip.budget,
      ...(clip.triage ? { triage: true } : {}),
      ...(audioTower ? { audioTower } : {}),
    },
    device,
  );
}

/** What `checkFit` is asked: the recording's length (seconds or minutes), and the load's and request's choices. */
export interface FitOptions {
  /** The recording's length in seconds; give this or `minutes`. */
  seconds?: number;
  minutes?: number;
  /** The policy of the request (default 'wnw', as a load's); its budget sizes the KV pool, 'full' the whole cache. */
  policy?: PolicyName;
  /** r_GPU (default 0.2, as a load's); ignored by 'full'. */
  budget?: number;
  /** `LoadOptions.kvPrecision` (default 'f32'). */
  kv?: KvPrecision;
  /** `LoadOptions.weightFormat` (default 'f32'); a converted folder keeps its own whatever is asked, as its load does. */
  weightFormat?: WeightFormat;
  /**
   * The device: the WebGPU adapter's limits (null where the CPU backend will run) and the
   * memory the browser reports, as `fitDevice()` gives them, or the exact bytes the run may
   * take (`memoryBytes`). Default: no adapter limits and the memory this page reports, i.e.
   * the CPU backend's view; pass `await fitDevice()` for a WebGPU load.
   */
  device?: FitDevice;
}

const show = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));

function recordingSeconds(o: FitOptions): number {
  const given = [o.seconds, o.minutes].filter((v) => v !== undefined);
  if (given.length !== 1)
    throw new WnwError(
      'BAD_ARGUMENT',
      `checkFit takes the recording's length as one of seconds or minutes, got ${given.length ? 'both' : 'neither'}`,
    );
  const seconds = o.seconds ?? 60 * o.minutes!;
  if (!(typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0))
    throw new WnwError(
      'BAD_ARGUMENT',
      `checkFit's ${o.seconds !== undefined ? `seconds (${show(o.seconds)})` : `minutes (${show(o.minutes)})`} must be a positive number`,
    );
  return seconds;
}

/**
 * Whether a recording of this length fits this device with the folder `inspectModel`
 * read, for a load with `kv`, `weightFormat` and a request with `policy` at `budget`: every
 * weight tensor and buffer within one binding, and the weights, buffers and KV pool within
 * the memory the device has. `fits` is null where the browser does not say enough to tell;
 * a refusal names each limit with the bytes needed and available (`problems`), and the
 * minutes that would fit (`wouldFit`). A recording past the model's positions is a
 * CONTEXT_TOO_LONG error (PositionsExceededError), as its load's or transcription's would be.
 * Pure arithmetic on the summary: no file is read and no adapter asked.
 */
export function checkFit(summary: ModelSummary, options: FitOptions): FitVerdict {
  const seconds = recordingSeconds(options);
  const policy = options.policy ?? 'wnw';
  const budget = options.budget ?? 0.2;
  if (!(typeof budget === 'number' && budget > 0 && budget <= 1))
    throw new WnwError('BAD_ARGUMENT', `checkFit's budget must be in (0, 1], got ${show(budget)}`);
  const requested = options.weightFormat ?? 'f32';
  const weightFormat = summary.converted ?? requested;
  const weightBytes = summary.weightBytesByFormat[weightFormat];
  if (weightBytes === undefined)
    throw new WnwError(
      'BAD_ARGUMENT',
      `checkFit's weightFormat ${show(requested)} is not one of ${summary.weightFormats.join(', ')}`,
    );
  const c = summary.config;
  const audioTokens = audioTokensOf(c, seconds);
  if (audioTokens > maxAudioTokens(c))
    throw new PositionsExceededError(
      promptLength(c, audioTokens),
      c.maxPositions,
      summary.maxAudioSeconds / 60,
      `${summary.name}: a ${(seconds / 60).toFixed(1)} min recording (${audioTokens} audio tokens)`,
    );
  return clipFit(
    { ...summary, weightFormat, weightBytes },
    { seconds, kvPrecision: options.kv ?? 'f32', budget: policyBudget(policy, budget), triage: !summary.headsJson },
    options.device ?? { limits: null, deviceMemoryGiB: reportedDeviceMemoryGiB() },
  );
}

/**
 * This page's device as `checkFit` takes it: the WebGPU adapter's limits (null without one:
 * the CPU backend runs then) and the memory the browser reports (`navigator.deviceMemory`).
 */
export async function fitDevice(gpu?: GPU): Promise<FitDevice> {
  const deviceMemoryGiB = reportedDeviceMemoryGiB();
  return { limits: await adapterLimits(gpu), ...(deviceMemoryGiB !== undefined ? { deviceMemoryGiB } : {}) };
}

/** The adapter's per-buffer limits, or null without WebGPU or an adapter (the CPU backend runs then). */
export async function adapterLimits(
  gpu: GPU | undefined = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu,
): Promise<DeviceLimits | null> {
  try {
    const adapter = await gpu?.requestAdapter();
    if (!adapter) return null;
    return {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    };
  } catch {
    return null;
  }
}
