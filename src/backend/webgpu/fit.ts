/**
 * "Will it fit this device?" from the config alone, before any weight is read or buffer
 * made: the decoder's weights in their format, the session's prefill and decode buffers
 * and the KV pool the plan allocates for a recording (the same sizing the WebGPU backend's pool layout
 * and `npm run bench -- --memory` use), against the adapter's limits.
 *
 * Two kinds of limit. Per buffer (`maxStorageBufferBindingSize`, `maxBufferSize`): the
 * weight tensors (fit-bindings.ts), and the prompt's buffers and one layer's pool pages,
 * which grow with the recording. In total:
 * WebGPU reports no memory size, so the only figure a page has is `navigator.deviceMemory`
 * (GiB rounded down to a power of two and capped, at 8 or more by browser): the device has
 * at least that and, below the cap, less than twice it; between the bounds the verdict is
 * left open rather than guessed. A caller that knows the memory exactly says so
 * (`memoryBytes`). A recording refused for its length comes with the minutes that would
 * fit, found with the same sizing, so the answer is a length to try and not only a no.
 */
import { ContextTooLongError, ModelTooBigError } from '../../errors.js';
import {
  kvHeadCount,
  promptLength,
  segmentLength,
  teacherForced,
  type ModelConfig,
  type PromptIds,
} from '../../model/config.js';
import { decoderWeightBytes } from '../../model/packed-weights.js';
import type { WeightFormat } from '../../model/quant.js';
import {
  UNBOUNDED_LIMITS,
  bindingLimitOf,
  mib,
  problem,
  weightBindingProblems,
  type DeviceLimits,
  type FitProblem,
} from './fit-bindings.js';
import { RECALL_PAGES_PER_HEAD, grownTextPages } from '../../kv/sizing.js';
import { kvElementBytes, type KvPrecision } from '../../kv/precision.js';
import { layerLayout } from './pool-layout.js';
import { sessionSizes } from './session-buffers.js';
import type { TowerBytes } from '../../encoder/sizing.js';

export {
  UNBOUNDED_LIMITS,
  bindingLimitOf,
  matrixBindingProblem,
  weightBindingProblems,
  type DeviceLimits,
  type FitLimit,
  type FitProblem,
} from './fit-bindings.js';

const size = (b: number) =>
  b < 2 ** 20 ? `${(b / 2 ** 10).toFixed(0)} KiB` : b < 2 ** 30 ? mib(b) : `${(b / 2 ** 30).toFixed(2)} GiB`;

export interface MemoryNeedRequest {
  weightFormat: WeightFormat;
  /** The lm_head is the embedding's table. */
  tied: boolean;
  audioTokens: number;
  kvPrecision: KvPrecision;
  /** r_GPU of the policy; 1 (the full cache) sizes the full pool. */
  budget: number;
  /** The cap on generated tokens (a length guard: it sizes the RoPE table, no KV); default: the transcriber's, 6 per second of audio. */
  maxNewTokens?: number;
  /**
   * Generated tokens per second of audio the pool is sized for: text KV is taken as
   * tokens are generated, so the peak follows the transcript's real length, not the cap.
   * Default TEXT_TOKENS_PER_SECOND.
   */
  textPerSecond?: number;
  /**
   * The audio tower where it runs on this GPU (a Hugging Face folder's, on WebGPU): it runs
   * before the prefill beside the decoder's weights and is freed before it (encoder/sizing.ts).
   */
  audioTower?: TowerBytes;
  /** The prompt around the audio (a language's); default the config's. */
  prompt?: PromptIds;
  /** The folder has no heads.json: the page will triage it (Transcriber.calibrate), whose peak `peakBytes` then covers too. */
  triage?: boolean;
}

/** Seconds of the longest calibration clip the fit check sizes a triage for (Voxtral pads every clip to 30 s). */
export const TRIAGE_CLIP_SECONDS = 30;

/**
 * Bytes the triage adds to a session sized for its teacher-forced prompt of n rows (triage.ts's
 * buffers): per layer the answer rows' input, queries and attention outputs and the layer's K
 * and V (in the pool's precision), and the backward's rows.
 */
export function triageBytes(
  c: ModelConfig,
  answerRows: number,
  audioLength: number,
  promptRows: number,
  kvBytes: number,
): number {
  const T = answerRows;
  const n = promptRows;
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const perLayer = 4 * T * (D + 2 * QD) + 2 * kvBytes * n * KVD;
  return (
    c.numLayers * perLayer +
    4 *
      (5 * T * D + // normed rows, gy, r twice, the attention's residual
        T * D + // the gradient at a norm's output
        T * c.vocabSize + // dl
        T + // CE
        5 * T * I + // gate and up, their gradient, the activation's
        T * QD + // δ
        T * c.numHeads * n + // score gradients
        T * (QD + 2 * KVD) + // dqkv
        T * c.numHeads * audioLength + // attention rows
        T * c.numKvHeads) // sensitivity sums
  );
}

/**
 * The GPU memory the head triage of one clip holds at its peak (triage.ts): the weights, a
 * session sized for the teacher-forced prompt of `audioTokens` and `answerRows` (one layer's
 * K/V, no pool), the triage's own buffers (every layer's K/V among them) and the readback of
 * a layer's attention rows.
 */
export function triagePeakBytes(
  c: ModelConfig,
  weightBytes: number,
  audioTokens: number,
  answerRows: number,
  kvPrecision: KvPrecision,
  limits: DeviceLimits = UNBOUNDED_LIMITS,
  prompt: PromptIds = c,
): number {
  const forced = teacherForced(prompt, new Array<number>(answerRows - 1).fill(0));
  const s = sessionSizes(
    c,
    {
      audioLength: audioTokens,
      maxNewTokens: 1,
      request: { decodeHeads: [], prefillQueries: 0 },
      prompt: forced,
      layered: true,
    },
    limits,
    undefined,
    kvElementBytes(kvPrecision),
  );
  const pad = (b: number) => Math.max(16, Math.ceil(b / 16) * 16);
  const readback = pad(4 * answerRows * c.numHeads * audioTokens) + pad(4 * answerRows * c.numKvHeads);
  const n = promptLength(forced, audioTokens);
  return (
    weightBytes +
    s.prefillBytes +
    s.decodeBytes +
    triageBytes(c, answerRows, audioTokens, n, kvElementBytes(kvPrecision)) +
    readback
  );
}

/** One phase's peak: the prefill (pool as it stands then) or the decode (the final pool). */
export interface PhasePeaks {
  /** weights + decode buffers + prefill buffers + the pool after the prefill + one layer's K/V of readback staging where CPU copies are read. */
  prefill: number;
  /** weights + decode buffers + the pool grown for the text + one shard's K/V being copied into its larger buffer. */
  decode: number;
  /** weights + the audio tower's weights and one encode batch; the weights alone where no tower runs on the GPU. */
  encode: number;
}

export interface MemoryNeed {
  audioTokens: number;
  /** Generated tokens the decode phase is sized for (textPerSecond × the audio's seconds). */
  textTokens: number;
  weightBytes: number;
  prefillBytes: number;
  decodeBytes: number;
  /** The KV pool at the end of decoding, of the full cache and the bound of a policy at `budget` (equal at 1). */
  poolFull: number;
  poolBytes: number;
  /** The same pools during the prefill: the audio, the recall headroom and the prompt's text. */
  prefillPoolFull: number;
  prefillPoolBytes: number;
  /** Per phase, at `budget` and for the full cache. */
  phases: PhasePeaks;
  phasesFull: PhasePeaks;
  /** The larger phase at `budget`. */
  peakBytes: number;
  /** The same with the full cache's pool, so a comparison needs no second plan. */
  peakFull: number;
  /** The peak of a head triage (triagePeakBytes) of a TRIAGE_CLIP_SECONDS clip; in the peaks where the request asks for a triage. */
  triageBytes: number;
}

/** The transcriber's default cap on generated tokens for `seconds` of audio: 6 a second, at least 8 (a length guard, not a reserve). */
export function defaultMaxNewTokens(seconds: number): number {
  return Math.max(8, Math.ceil(6 * seconds));
}

/**
 * Generated tokens per second of audio that "will it fit?" sizes the text KV for: speech
 * runs at about 2.5–3 words a second, 3–4 tokens, so 4 holds a dense transcript. A run
 * that writes more grows its pool further, up to the cap.
 */
export const TEXT_TOKENS_PER_SECOND = 4;

/** Audio tokens of `seconds` of audio at the model's rate, as the fit verdicts count a clip. */
export function audioTokensOf(c: ModelConfig, seconds: number): number {
  return Math.ceil(seconds * c.audio.tokensPerSecond);
}

/** The most audio tokens the model's positions hold beside the prompt's own tokens. */
export function maxAudioTokens(c: ModelConfig): number {
  return c.maxPositions - promptLength(c, 0);
}

/**
 * Pages per KV head of the full cache and of a policy's bound at `budget`: at most
 * `budget` of the audio positions and a part-filled page, the recall headroom (every head
 * counted tidal), and `textPages`; never more than the full cache's.
 */
function poolPages(
  c: ModelConfig,
  audioTokens: number,
  textPages: number,
  budget: number,
): { full: Int32Array; atBudget: Int32Array } {
  const P = segmentLength(c);
  const heads = kvHeadCount(c);
  const audio = Math.ceil(audioTokens / P);
  const kept = Math.min(audio, Math.ceil((budget * audioTokens) / P) + 1) + Math.min(audio, RECALL_PAGES_PER_HEAD);
  return {
    full: new Int32Array(heads).fill(audio + textPages),
    atBudget: new Int32Array(heads).fill(Math.min(audio, kept) + textPages),
  };
}

/** Text pages per head once `generated` tokens have been: the prompt's, and those the pool grew by. */
function textPagesOf(c: ModelConfig, generated: number, p: PromptIds = c): number {
  const P = segmentLength(c);
  const prompt = p.prefix.length + p.instruction.length;
  return Math.ceil(prompt / P) + grownTextPages(prompt, generated, P);
}

/**
 * Pool bytes (pages plus the pool's positions, tables and decode scratch, as a per-layer prefill allocates
 * them) of the full cache and `budget`'s bound, with `generated` tokens' text.
 */
export function poolBytes(
  c: ModelConfig,
  audioTokens: number,
  generated: number,
  kvBytes: number,
  budget: number,
  limit: number,
): { full: number; atBudget: number } {
  const P = segmentLength(c);
  const pages = poolPages(c, audioTokens, textPagesOf(c, generated), budget);
  return {
    full: layerLayout(c, pages.full, P, limit, kvBytes).bytes,
    atBudget: layerLayout(c, pages.atBudget, P, limit, kvBytes).bytes,
  };
}

/**
 * The GPU memory a recording of `audioTokens` needs (per-layer prefill, as the transcriber
 * runs it): the largest of its phases. While a GPU audio tower encodes (`audioTower`), the
 * decoder's weights and the tower's weights and batch. During the prefill the weights, the decode
 * step's buffers (made at begin), the prefill buffers and the pool as the layers have
 * placed it (no generated text yet), with one layer's K/V staged for its CPU copies where
 * the policy keeps any; during decoding the weights, the decode buffers and the pool grown
 * for `textPerSecond` tokens a second, one layer's K/V alive twice while its shard is
 * copied into a larger buffer. Throws ContextTooLongError, naming the buffer, where one
 * of the session's buffers or one layer's pool pages under the budget's plan passes a binding.
 */
export function memoryNeed(c: ModelConfig, r: MemoryNeedRequest, limits: DeviceLimits = UNBOUNDED_LIMITS): MemoryNeed {
  const A = r.audioTokens;
  const seconds = A / c.audio.tokensPerSecond;
  const maxNewTokens = r.maxNewTokens ?? defaultMaxNewTokens(seconds);
  const textTokens = Math.min(maxNewTokens, Math.ceil((r.textPerSecond ?? TEXT_TOKENS_PER_SECOND) * seconds));
  const kvBytes = kvElementBytes(r.kvPrecision);
  const prompt = r.prompt ?? c;
  const s = sessionSizes(
    c,
    {
      audioLength: A,
      maxNewTokens,
      request: { decodeHeads: [], prefillQueries: prompt.instruction.length },
      prompt: r.prompt,
      layered: true,
    },
    limits,
    undefined,
    kvBytes,
  );
  const P = segmentLength(c);
  const bind = bindingLimitOf(limits).bytes;
  const layout = (pages: Int32Array, strict: boolean) => {
    try {
      return layerLayout(c, pages, P, bind, kvBytes);
    } catch (e) {
      // The full cache for comparison, even where its pages of one layer would not bind.
      if (strict) throw e;
      return layerLayout(c, pages, P, Infinity, kvBytes);
    }
  };
  const full = r.budget >= 1;
  const before = poolPages(c, A, textPagesOf(c, 0, prompt), r.budget);
  const after = poolPages(c, A, textPagesOf(c, textTokens, prompt), r.budget);
  const pool = {
    prefill: layout(full ? before.full : before.atBudget, true),
    decode: layout(full ? after.full : after.atBudget, true),
  };
  const poolFull = { prefill: layout(before.full, full), decode: layout(after.full, full) };
  const weightBytes = decoderWeightBytes(c, r.weightFormat, r.tied).total;
  const base = weightBytes + s.decodeBytes;
  // One layer's pages (K and V) at their final size: what a growth copies, and what a CPU copy's readback
  // stages (in the pool's precision, as the prefill holds them).
  const layerKv = (pages: Int32Array) => 2 * c.numKvHeads * pages[0] * P * c.headDim * kvBytes;
  const stagedKv = 2 * kvBytes * s.promptLength * c.numKvHeads * c.headDim;
  const encode = weightBytes + (r.audioTower ? r.audioTower.weightBytes + r.audioTower.batchBytes : 0);
  const phases = (
    p: { prefill: { bytes: number }; decode: { bytes: number } },
    pages: Int32Array,
    staging: number,
  ): PhasePeaks => ({
    prefill: base + s.prefillBytes + p.prefill.bytes + staging,
    decode: base + p.decode.bytes + layerKv(pages),
    encode,
  });
  // A clip of TRIAGE_CLIP_SECONDS and its transcript at TEXT_TOKENS_PER_SECOND, plus the stop token.
  const triage = triagePeakBytes(
    c,
    weightBytes,
    audioTokensOf(c, TRIAGE_CLIP_SECONDS),
    Math.ceil(TEXT_TOKENS_PER_SECOND * TRIAGE_CLIP_SECONDS) + 1,
    r.kvPrecision,
    limits,
    prompt,
  );
  const peak = (x: PhasePeaks) => Math.max(x.prefill, x.decode, x.encode, r.triage ? triage : 0);
  const at = phases(pool, full ? after.full : after.atBudget, full ? 0 : stagedKv);
  const ofFull = phases(poolFull, after.full, 0);
  return {
    audioTokens: A,
    textTokens,
    weightBytes,
    prefillBytes: s.prefillBytes,
    decodeBytes: s.decodeBytes,
    poolFull: poolFull.decode.bytes,
    poolBytes: pool.decode.bytes,
    prefillPoolFull: poolFull.prefill.bytes,
    prefillPoolBytes: pool.prefill.bytes,
    phases: at,
    phasesFull: ofFull,
    peakBytes: peak(at),
    peakFull: peak(ofFull),
    triageBytes: triage,
  };
}

/** The lowest cap any browser puts on `deviceMemory`: below it the value bounds the memory from above too. */
export const DEVICE_MEMORY_CAP_GIB = 8;

export interface FitDevice {
  /** The WebGPU adapter's limits; null where the CPU backend runs (no bindings to fit). */
  limits: DeviceLimits | null;
  /** `navigator.deviceMemory` where the browser reports it. */
  deviceMemoryGiB?: number;
  /**
   * The memory the run may take where it is known exactly (a GPU's stated size, a budget a
   * caller sets): a hard line, taken over `deviceMemoryGiB`, whose report only brackets it.
   */
  memoryBytes?: number;
}

/** `navigator.deviceMemory` where the page's browser reports it (never in Node). */
export function reportedDeviceMemoryGiB(): number | undefined {
  return (globalThis as { navigator?: { deviceMemory?: number } }).navigator?.deviceMemory;
}

/** Where a recording is too long for the device: the whole minutes that fit instead, and the sentence saying so. */
export interface WouldFit {
  minutes: number;
  text: string;
}

export interface FitVerdict {
  /** false: some limit fails (see `problems`); null: the device does not say enough to tell. */
  fits: boolean | null;
  problems: FitProblem[];
  /** Null when a buffer of the recording passes a binding (then the sizes cannot be planned). */
  plan: MemoryNeed | null;
  text: string;
  /** Set when it does not fit and a shorter recording would (absent where the weights alone fail). */
  wouldFit?: WouldFit;
}

const budgetLabel = (budget: number) => (budget >= 1 ? 'full cache' : `r_GPU ${budget}`);

/**
 * Whether a model (its config, weight format, tied head) and a recording fit a device:
 * every weight tensor and session buffer within one binding, and weights + buffers + the
 * plan's KV pool within the memory the device reports. Pure: no adapter is asked here.
 */
export function checkFit(c: ModelConfig, r: MemoryNeedRequest, device: FitDevice): FitVerdict {
  const problems: FitProblem[] = device.limits ? weightBindingProblems(c, r.weightFormat, device.limits) : [];
  // A layer matrix no binding holds fails at every length: a shorter recording is no answer then.
  const weightsBind = problems.length === 0;
  let plan: MemoryNeed | null = null;
  try {
    plan = memoryNeed(c, r, device.limits ?? UNBOUNDED_LIMITS);
  } catch (e) {
    if (!(e instanceof ContextTooLongError) || !device.limits) throw e;
    // The error names the buffer and says what helps; the limit is named here.
    const bind = bindingLimitOf(device.limits);
    const what = e.limit === 'prompt-binding' ? "the recording's prompt buffers" : "one layer's KV pool pages";
    problems.push({
      limit: bind.limit,
      what,
      bytes: e.neededBytes,
      limitBytes: bind.bytes,
      advice: e.message,
      message: `${e.message} The limit is this device's ${bind.limit}.`,
    });
  }
  const memory = plan ? memoryVerdict(plan.peakBytes, device, 'weights, buffers and KV pool together') : null;
  if (memory?.problem) problems.push(memory.problem);
  const need = plan
    ? `${size(plan.weightBytes)} of ${r.weightFormat} weights + ` +
      `${size(plan.phases.prefill - plan.weightBytes)} while prefilling (buffers and the KV pool so far) or ` +
      `${size(plan.phases.decode - plan.weightBytes)} while decoding ` +
      `(the KV pool (${budgetLabel(r.budget)}) with ${plan.textTokens.toLocaleString('en-US')} tokens of text)` +
      (r.audioTower
        ? ` or ${size(plan.phases.encode - plan.weightBytes)} while encoding (the ${r.audioTower.format} audio tower)`
        : '') +
      ` = ${size(plan.peakBytes)} at the peak`
    : `${size(decoderWeightBytes(c, r.weightFormat, r.tied).total)} of ${r.weightFormat} weights and, for this recording, a buffer larger than one binding`;
  if (problems.length) {
    const wouldFit = weightsBind ? wouldFitOf(c, r, device) : undefined;
    const text = `Needs ${need}; does not fit. ${problems.map((p) => p.message).join(' ')}${wouldFit ? ` ${wouldFit.text}` : ''}`;
    return { fits: false, problems, plan, text, ...(wouldFit ? { wouldFit } : {}) };
  }
  return {
    fits: memory?.fits ?? null,
    problems,
    plan,
    text: `Needs ${need}; ${memory?.text ?? 'this device does not say how much memory it has'}.`,
  };
}

/** The memory the device surely has: the exact line where one is given, else the reported lower bound. */
export function sureMemoryBytes(device: FitDevice): number | undefined {
  if (device.memoryBytes !== undefined) return device.memoryBytes;
  const gib = device.deviceMemoryGiB;
  return gib !== undefined && gib > 0 ? gib * 2 ** 30 : undefined;
}

/**
 * The whole minutes of audio that fit `device` with `r`'s weights, budget, precision and
 * text cap: the longest recording whose plan binds and whose peak is within the memory the
 * device surely has, at most what the model's positions hold. A binary search over
 * `memoryNeed`, the sizing the verdict itself uses: the peak only grows with the audio.
 */
export function minutesThatFit(c: ModelConfig, r: MemoryNeedRequest, device: FitDevice): number {
  const memory = sureMemoryBytes(device);
  const limits = device.limits ?? UNBOUNDED_LIMITS;
  const fits = (minutes: number) => {
    try {
      const p = memoryNeed(c, { ...r, audioTokens: audioTokensOf(c, 60 * minutes) }, limits);
      return memory === undefined || p.peakBytes <= memory;
    } catch (e) {
      if (e instanceof ContextTooLongError) return false;
      throw e;
    }
  };
  // Invariant: `lo` fits (none at all trivially does), `hi` does not (past the positions, or tried).
  let lo = 0;
  let hi = Math.floor(maxAudioTokens(c) / c.audio.tokensPerSecond / 60) + 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

function wouldFitOf(c: ModelConfig, r: MemoryNeedRequest, device: FitDevice): WouldFit {
  const minutes = minutesThatFit(c, r, device);
  const memory = sureMemoryBytes(device);
  const at = `At ${r.budget >= 1 ? 'the ' : ''}${budgetLabel(r.budget)} with ${r.kvPrecision} KV and ${r.weightFormat} weights`;
  const within = memory !== undefined ? `in ${size(memory)}` : "within this device's bindings";
  const fit =
    minutes === 0
      ? 'not even a minute of audio fits'
      : `about ${minutes} minute${minutes === 1 ? ' of audio fits' : 's of audio fit'}`;
  return { minutes, text: `${at}, ${fit} ${within}.` };
}

const MEMORY_FIX =
  'convert the folder to 4-bit (npx wnw convert HF_DIR OUT_DIR --quant q4), use a shorter clip or WnW with a smaller budget, or a device with more memory';

function memoryVerdict(
  needBytes: number,
  device: FitDevice,
  what: string,
  fix = MEMORY_FIX,
): { fits: boolean | null; text: string; problem?: FitProblem } {
  const sure = sureMemoryBytes(device);
  if (sure === undefined) return { fits: null, text: 'this browser does not say how much memory the device has' };
  const refuse = (advice: string) => ({
    fits: false,
    text: '',
    problem: problem({ limit: 'deviceMemory', what, bytes: needBytes, limitBytes: sure, advice }),
  });
  if (device.memoryBytes !== undefined) {
    return needBytes <= sure ? { fits: true, text: `fits the ${size(sure)} limit` } : refuse(fix);
  }
  const gib = device.deviceMemoryGiB!;
  if (needBytes <= sure) return { fits: true, text: `fits the ${gib} GiB (or more) this device reports` };
  if (gib < DEVICE_MEMORY_CAP_GIB && needBytes >= 2 * sure)
    return refuse(`the device reports ${gib} GiB, so it has less than ${2 * gib} GiB: ${fix}`);
  return { fits: null, text: `the device reports at least ${gib} GiB, so it may not fit` };
}

/**
 * What refuses a model before its weights are read, when the recording is not known yet: a
 * layer matrix no binding holds in `format`, or decoder weights alone past twice the memory
 * the device reports (a recording's own buffers and pool are judged when it is transcribed).
 */
export function loadFitProblems(c: ModelConfig, format: WeightFormat, tied: boolean, device: FitDevice): FitProblem[] {
  const problems = device.limits ? weightBindingProblems(c, format, device.limits) : [];
  const fix =
    format === 'q4'
      ? 'use a device with more memory'
      : "store the decoder weights as q4 (npx wnw convert HF_DIR OUT_DIR --quant q4, or weightFormat 'q4'), or use a device with more memory";
  const memory = memoryVerdict(decoderWeightBytes(c, format, tied).total, device, `the ${format} decoder`, fix);
  if (memory.problem) problems.push(memory.problem);
  return problems;
}

/**
 * Throws ModelTooBigError, naming `where`, when `loadFitProblems` finds any; where the
 * recording is known already, when `checkFit` says it does not fit, and then the error
 * names the minutes that would.
 */
export function refuseUnfit(
  c: ModelConfig,
  format: WeightFormat,
  tied: boolean,
  device: FitDevice,
  where: string,
  recording?: Omit<MemoryNeedRequest, 'weightFormat' | 'tied'>,
): void {
  if (recording) {
    const v = checkFit(c, { ...recording, weightFormat: format, tied }, device);
    if (v.fits === false) throw new ModelTooBigError(v.problems, where, v.wouldFit);
    return;
  }
  const problems = loadFitProblems(c, format, tied, device);
  if (problems.length) throw new ModelTooBigError(problems, where);
}

/** What the CPU backend's host memory must hold (`hostMemoryNeed`). */
export interface HostNeedRequest {
  weightFormat: WeightFormat;
  tied: boolean;
  /**
   * The decoder is packed while it is read from an upstream folder: one tensor at a time is
   * widened to f32 beside the packed ones, at most the embedding table.
   */
  packAtLoad?: boolean;
  /** The recording, where known at load: its KV and prefill are held in host memory too. */
  recording?: {
    audioTokens: number;
    kvPrecision: KvPrecision;
    /** Default: the transcriber's, 6 per second of audio. */
    maxNewTokens?: number;
    prompt?: PromptIds;
  };
}

export interface HostNeed {
  /** The decoder weights as the CPU backend holds them (packed where packed). */
  weightBytes: number;
  /** Beside the weights while loading (the f32 tensor being packed). */
  loadBytes: number;
  /** The prefill's f32 activations for the prompt (one layer's at a time). */
  prefillBytes: number;
  /** Every position's K/V: the pool and, under WnW, the offload store hold them all between them. */
  kvBytes: number;
  peakBytes: number;
}

/**
 * The host memory the CPU backend needs: the weights as held, plus the largest of the load's
 * transient f32 tensor, the prefill (its activations and the prompt's K/V) and the decode (the
 * K/V of prompt and generated text, page-rounded per KV head). On the CPU the pool and WnW's
 * offload store are both host memory, so a policy's budget moves K/V between them and
 * saves none of it: every position's K/V is counted.
 */
export function hostMemoryNeed(c: ModelConfig, r: HostNeedRequest): HostNeed {
  const weightBytes = decoderWeightBytes(c, r.weightFormat, r.tied).total;
  const loadBytes = r.packAtLoad ? 4 * c.vocabSize * c.hiddenSize : 0;
  let prefillBytes = 0;
  let kvBytes = 0;
  let promptKv = 0;
  const rec = r.recording;
  if (rec) {
    const prompt = rec.prompt ?? c;
    const n = promptLength(prompt, rec.audioTokens);
    const seconds = rec.audioTokens / c.audio.tokensPerSecond;
    // Text KV is taken as tokens are generated: sized as memoryNeed sizes the pool for it.
    const text = Math.min(
      rec.maxNewTokens ?? defaultMaxNewTokens(seconds),
      Math.ceil(TEXT_TOKENS_PER_SECOND * seconds),
    );
    const P = segmentLength(c);
    const qd = c.numHeads * c.headDim;
    const kvd = c.numKvHeads * c.headDim;
    // reference/prefill.ts: x, xn, tmp [n, D]; q, att [n, QD]; gate, up [n, I]; k, v [n, KVD];
    // causalAttention's one KV head's keys and values [n, headDim] and a score row.
    prefillBytes = 4 * n * (3 * c.hiddenSize + 2 * qd + 2 * c.intermediateSize + 2 * kvd + 2 * c.headDim) + 8 * n;
    const slot = 2 * c.headDim * kvElementBytes(rec.kvPrecision);
    const pages = (positions: number) => Math.ceil(positions / P) * P;
    promptKv = kvHeadCount(c) * pages(n) * slot;
    kvBytes = kvHeadCount(c) * pages(n + text) * slot;
  }
  const peakBytes = weightBytes + Math.max(loadBytes, prefillBytes + promptKv, kvBytes);
  return { weightBytes, loadBytes, prefillBytes, kvBytes, peakBytes };
}

/** A host-memory shortfall, in the shape of the device ones (`FitProblem`). */
export interface HostFitProblem extends Omit<FitProblem, 'limit'> {
  limit: 'hostMemory';
}

/**
 * Throws ModelTooBigError, naming `where`, the bytes the CPU backend needs and the bytes
 * available (and where that figure comes from), when the need is over what is available.
 */
export function refuseHostUnfit(
  c: ModelConfig,
  r: HostNeedRequest,
  available: { bytes: number; source: string },
  where: string,
): HostNeed {
  const need = hostMemoryNeed(c, r);
  if (need.peakBytes <= available.bytes) return need;
  const parts = [`${size(need.weightBytes)} of ${r.weightFormat} weights`];
  if (need.loadBytes) parts.push(`${size(need.loadBytes)} of one f32 tensor while packing at load`);
  if (r.recording)
    parts.push(
      `${size(need.kvBytes)} of ${r.recording.kvPrecision} KV (every position's, pool and offload store together)`,
    );
  const fix =
    r.weightFormat === 'q4'
      ? 'free memory, use a shorter recording or f16 KV (kvPrecision), or a machine with more memory'
      : `convert the folder to 4-bit (npx wnw convert HF_DIR OUT_DIR --quant q4) or load it with weightFormat 'q4', or free memory`;
  const what = 'the CPU backend (host memory)';
  const message =
    `${what} needs ${need.peakBytes} bytes (${size(need.peakBytes)}: ${parts.join(', ')}) ` +
    `but ${available.bytes} bytes (${size(available.bytes)}) are available per ${available.source}: ${fix}.`;
  const problem: HostFitProblem = {
    limit: 'hostMemory',
    what,
    bytes: need.peakBytes,
    limitBytes: available.bytes,
    advice: fix,
    message,
  };
  throw new ModelTooBigError([problem], where);
}
