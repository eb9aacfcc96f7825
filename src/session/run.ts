/**
 * One transcription: encode, prefill, let the policy place the KV, then decode step by
 * step with the policy's recall/release plan applied between steps. Whatever happens
 * (cancel, error), the tokens decoded so far come back with the stats.
 */
import { CancelledError, DeviceLostError, WnwError } from '../errors.js';
import type { DecoderBackend, StepResult } from '../backend/types.js';
import { policyLayout } from '../backend/prompt.js';
import { sharedPrefillWindows } from '../policy/registry.js';
import type { LoadedModel } from '../model/loader.js';
import { planLagOf, type KvPolicy } from '../policy/types.js';
import {
  EMPTY_PLAN,
  type AttentionRequest,
  type LayerPrefill,
  type StepObservation,
  type StepPlan,
} from '../kv/plan.js';
import type {
  Probe,
  ProgressEvent,
  StepStats,
  TranscribeOptions,
  TranscriptionResult,
  TranscriptionStats,
} from '../types.js';
import { anchorSum, focusOf, wordsFromFocus, wordsWithin } from './timing.js';
import { decodeReads } from './decode-reads.js';
import { ReplyUnwrapper } from './reply.js';
import { isStop, promptLength, segmentLength, type PromptIds } from '../model/config.js';
import { defaultMaxNewTokens } from '../backend/webgpu/fit.js';

export interface RunInput {
  model: LoadedModel;
  backend: DecoderBackend;
  /** The prompt around the audio where it is not the config's (another language's). */
  prompt?: PromptIds;
  policy: KvPolicy;
  policyName: TranscriptionStats['policy'];
  budget: number;
  /** Audio embeddings [audioLength, hiddenSize] and the audio's duration. */
  embeddings: Float32Array;
  audioLength: number;
  audioSeconds: number;
  encodeMs: number;
  /** KV heads whose attention dates the words (calibrated anchors); may be empty. */
  timingHeads: number[];
  /** Tidal heads, for the tide chart (empty for policies without them). */
  tidalHeads: readonly number[];
  options: TranscribeOptions;
  progress: (e: ProgressEvent) => void;
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/**
 * Lets the event loop run (a cancel click, a worker message, a repaint). The CPU
 * backend computes synchronously, so without this a long decode would never see its
 * AbortSignal. setTimeout(0) is clamped to 4 ms in browsers; a MessageChannel is not.
 */
const yieldToEventLoop = (): Promise<void> =>
  new Promise((resolve) => {
    if (typeof MessageChannel !== 'undefined') {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => {
        ch.port1.close();
        resolve();
      };
      ch.port2.postMessage(0);
    } else setTimeout(resolve, 0);
  });

/** Prefill and KV placement: layer by layer when the policy answers per layer, else after the whole prompt. */
async function prefillAndPlace(
  r: RunInput,
  embeddings: Float32Array,
  byLayer: LayerPrefill | undefined,
): Promise<{ token: number }> {
  const { backend, policy, options: o } = r;
  if (byLayer)
    return backend.prefillByLayer(embeddings, layerByLayer(byLayer, r.model.config.numLayers, o.signal, r.progress));
  const pre = await backend.prefill(embeddings);
  if (o.signal?.aborted) throw new CancelledError();
  await backend.applyPrefill(policy.prefill(pre.observation));
  return pre;
}

/**
 * The policy's per-layer answers, with the prefill's progress told after each layer and
 * the signal checked there: a cancel stops the prefill before the next layer runs.
 */
function layerByLayer(
  run: LayerPrefill,
  layers: number,
  signal: AbortSignal | undefined,
  progress: RunInput['progress'],
): LayerPrefill {
  let done = 0;
  return {
    layer(obs) {
      if (signal?.aborted) throw new CancelledError();
      const heads = run.layer(obs);
      done++;
      progress({ phase: 'prefill', fraction: Math.min(1, done / layers), detail: `layer ${done} of ${layers}` });
      if (signal?.aborted) throw new CancelledError();
      return heads;
    },
    finish: () => run.finish(),
  };
}

/** Which heads' decode attention the backend returns, and where each reader finds its own. */
interface HeadPlan {
  maxNew: number;
  layout: ReturnType<typeof policyLayout>;
  request: ReturnType<KvPolicy['request']>;
  /** The policy's own heads come first in `decodeHeads`: this many. */
  own: number;
  /** The session's request: the policy's, with word timing's and evaluation's reads (decode-reads.ts). */
  reads: AttentionRequest;
  timingIdx: number[];
  attentionIdx: number[];
  /** Queue each step before reading the last (KvPolicy.planLag 2, a backend with submitStep). */
  pipelined: boolean;
  /**
   * A policy at planLag 2 run in the waiting loop (teacher forcing): the plan held back a
   * step, so its plans apply two steps after the step they read, as in the pipelined loop.
   */
  heldPlan: { plan: StepPlan } | null;
}

function planHeads(r: RunInput): HeadPlan {
  const { model, policy, options: o } = r;
  const c = model.config;
  const N = r.audioLength;
  const forced = o.probe?.forcedTokens;
  // Teacher forcing runs exactly one step per forced token, so the length guard never cuts it.
  // Never past the model's positions: what is left of them after the prompt caps any request.
  const prompt = r.prompt ?? c;
  const positionsLeft = Math.max(1, c.maxPositions - promptLength(prompt, N));
  const maxNew = forced
    ? forced.length + 1
    : Math.min(positionsLeft, o.maxNewTokens ?? defaultMaxNewTokens(r.audioSeconds));
  const layout = policyLayout(c, N, prompt);
  const request = policy.request(layout);
  // Evaluation may ask for every head's attention: the policy still sees only its own heads.
  const allHeads = o.probe?.onAttention
    ? Array.from({ length: layout.numLayers * layout.numKvHeads }, (_, h) => h)
    : [];
  const reads = decodeReads(request, r.timingHeads, allHeads, Boolean(o.onStep));
  // The pipelined loop applies a plan two steps after the step it read: only where the policy allows it.
  const pipelined = !forced && planLagOf(policy) >= 2 && !!r.backend.submitStep && !!r.backend.readStep;
  return {
    maxNew,
    layout,
    request,
    own: request.decodeHeads.length,
    reads: reads.request,
    pipelined,
    heldPlan: !pipelined && planLagOf(policy) >= 2 ? { plan: EMPTY_PLAN } : null,
    timingIdx: reads.timingIdx,
    attentionIdx: reads.attentionIdx,
  };
}

/** Starts the backend's session and runs the prefill and KV placement: the first token. */
async function beginAndPrefill(r: RunInput, h: HeadPlan): Promise<number> {
  const { backend, policy, options: o } = r;
  // A policy that answers per layer lets the backend hold one layer's prompt KV at a time.
  const byLayer = policy.prefillByLayer?.(h.layout);
  // A prefill kept for the next policy on the clip scores the windows the others read too.
  const alsoScore = o.probe?.reusePrefill ? { alsoScore: sharedPrefillWindows(h.layout) } : {};
  backend.begin({
    // The pipelined loop queues one step past the last it reads: one more position.
    audioLength: r.audioLength,
    maxNewTokens: h.maxNew + (h.pipelined ? 2 : 1),
    request: { ...h.reads, ...alsoScore },
    returnLogits: Boolean(o.probe?.onLogits),
    layered: Boolean(byLayer),
    reusePrefill: o.probe?.reusePrefill,
    ...(r.prompt ? { prompt: r.prompt } : {}),
  });
  r.progress({ phase: 'prefill', fraction: 0 });
  await yieldToEventLoop();
  if (o.signal?.aborted) throw new CancelledError();
  const pre = await prefillAndPlace(r, r.embeddings, byLayer);
  return pre.token;
}

/** Running sums over the decode steps, for the stats. */
interface StepTotals {
  steps: number;
  rGpu: number;
  rGpuPeak: number;
  bytes: number;
  bytesMax: number;
  recalls: number;
  releases: number;
  stepMs: number;
}

/**
 * One decode step fed `token`, the policy's plan for it applied, its observers told:
 * the token the step predicts and the anchors' focus that dates it (-1 without anchors).
 */
async function decodeStep(
  r: RunInput,
  h: HeadPlan,
  token: number,
  text: string,
  acc: StepTotals,
): Promise<{ next: number; focus: number }> {
  const ts = now();
  return observeStep(r, h, token, await r.backend.step(token), text, acc, ts);
}

/** A step read back (fed `token`, started at `ts`): its observers told, the policy's plan applied. */
async function observeStep(
  r: RunInput,
  h: HeadPlan,
  token: number,
  res: StepResult,
  text: string,
  acc: StepTotals,
  ts: number,
): Promise<{ next: number; focus: number }> {
  const { backend, policy, options: o } = r;
  const N = r.audioLength;
  const probe = o.probe;
  if (res.logits) probe?.onLogits?.(res.observation.step, res.logits);
  probe?.onAttention?.(
    res.observation.step,
    h.attentionIdx.map((i) => res.observation.weights[i]),
  );
  if (probe?.onResidency) residencyHook(backend, res.observation.step, probe.onResidency);
  const { step, weights, queries, chunks, segmentSums } = res.observation;
  // The device's chunk choice, where the policy asked for it, whatever else was read back.
  const obs: StepObservation = {
    step,
    weights: weights.slice(0, h.own),
    queries: queries?.slice(0, h.own),
    ...(chunks ? { chunks, segmentSums } : {}),
  };
  let stepPlan = policy.afterStep(obs);
  if (h.heldPlan) {
    // A two-step lag in the waiting loop (teacher forcing): this plan waits one step, as it would pipelined.
    [stepPlan, h.heldPlan.plan] = [h.heldPlan.plan, stepPlan];
  }
  const moved = await backend.apply(stepPlan);
  const ms = now() - ts;
  // This step's attention predicts res.token, so its anchor focus dates that token (the
  // device's where it reduced the anchors, else from their weights).
  const anchor = res.observation.weights.length ? anchorSum(res.observation.weights, h.timingIdx, N) : null;
  const f = res.observation.focus ?? (anchor ? focusOf(anchor) : -1);
  const st = backend.residency();
  acc.steps++;
  acc.rGpu += st.rGpu;
  acc.rGpuPeak = Math.max(acc.rGpuPeak, st.rGpu);
  acc.bytes += moved.bytesToGpu;
  acc.bytesMax = Math.max(acc.bytesMax, moved.bytesToGpu);
  acc.recalls += moved.recalledPositions;
  acc.releases += moved.releasedPositions;
  acc.stepMs += ms;
  if (o.onStep) {
    o.onStep({
      step: acc.steps - 1,
      token,
      text,
      rGpu: st.rGpu,
      bytesToGpu: moved.bytesToGpu,
      msPerToken: ms,
      gpuKvBytes: st.gpuBytesInUse,
      textKvPages: st.textPages,
      focus: Math.round(f),
      ...segmentView(res.observation.segmentSums, anchor, backend, r.tidalHeads, segmentLength(r.model.config), N),
    });
  }
  r.progress({ phase: 'decode', fraction: f >= 0 ? Math.min(1, f / N) : Math.min(1, acc.steps / h.maxNew) });
  return { next: res.token, focus: f };
}

export async function runTranscription(r: RunInput): Promise<TranscriptionResult> {
  const { model, backend, options: o } = r;
  const c = model.config;
  const forced = o.probe?.forcedTokens;
  const h = planHeads(r);
  const tokens: number[] = [];
  const focus: number[] = [];
  // The reference model's SentencePiece tokenizer, or a Hugging Face folder's (tokenizer.json, tekken.json).
  const tok = model.text ?? model.tokenizer;
  const text = tok.decoder();
  // The answer as decoded (raw), and as shown: without the family's known answer wrapper.
  const reply = new ReplyUnwrapper(model.family?.replyWrappers ?? []);
  let raw = '';
  let out = '';
  const acc: StepTotals = { steps: 0, rGpu: 0, rGpuPeak: 0, bytes: 0, bytesMax: 0, recalls: 0, releases: 0, stepMs: 0 };
  let stoppedBy: TranscriptionStats['stoppedBy'] = 'eos';
  let stopToken: number | undefined;
  let error: Error | undefined;
  let prefillMs = 0;
  const t0 = now();
  const emit = (token: number, f: number) => {
    tokens.push(token);
    focus.push(f);
    const piece = text.push(token);
    raw += piece;
    const shown = reply.push(piece);
    out += shown;
    if (shown) o.onToken?.(shown, token);
  };
  try {
    const first = await beginAndPrefill(r, h);
    const initial = r.policy.afterPrefill?.();
    if (initial && (initial.recall.length || initial.release.length)) {
      // Counted with the decode steps' traffic: it is a recall, made before the first of them.
      const moved = await backend.apply(initial);
      acc.bytes += moved.bytesToGpu;
      acc.recalls += moved.recalledPositions;
      acc.releases += moved.releasedPositions;
    }
    prefillMs = now() - t0;
    r.progress({ phase: 'prefill', fraction: 1 });
    let token = forced ? (forced[0] ?? c.tokens.eos) : first;
    if (!isStop(c, token)) emit(token, -1);
    let lastYield = now();
    // Step t + 1 is queued before step t is read: its token never leaves the GPU, and the
    // CPU learns it (and sees a stop) one step late; the step queued past a stop is discarded.
    // Before each step: let the page breathe, honour a cancel, stop at the length guard.
    const mayStep = async (): Promise<boolean> => {
      if (now() - lastYield > 16) {
        await yieldToEventLoop();
        lastYield = now();
      }
      if (o.signal?.aborted) throw new CancelledError();
      if (tokens.length < h.maxNew) return true;
      stoppedBy = 'length-guard';
      return false;
    };
    let queued = false;
    while (h.pipelined && !isStop(c, token) && (await mayStep())) {
      const ts = now();
      if (!queued) backend.submitStep!(token);
      backend.submitStep!(null);
      queued = true;
      const step = await observeStep(r, h, token, await backend.readStep!(), out, acc, ts);
      token = step.next;
      if (!isStop(c, token)) emit(token, step.focus);
    }
    while (!h.pipelined && !isStop(c, token) && (await mayStep())) {
      const step = await decodeStep(r, h, token, out, acc);
      token = forced ? (forced[acc.steps] ?? c.tokens.eos) : step.next;
      if (!isStop(c, token)) emit(token, step.focus);
    }
    if (stoppedBy === 'eos' && !forced) stopToken = token;
  } catch (e) {
    error = e instanceof Error ? e : new Error(String(e));
    stoppedBy = e instanceof CancelledError ? 'cancelled' : 'error';
    if (!(e instanceof WnwError) && !(e instanceof CancelledError))
      error = new WnwError('BAD_ARGUMENT', `transcription failed: ${error.message}`, { cause: e });
  }
  // The tokenizer's and the unwrapper's held-back text is streamed too, so the pieces join to `text`.
  const rest = text.flush();
  raw += rest;
  const tail = reply.push(rest) + reply.flush();
  out += tail;
  if (tail && tokens.length) o.onToken?.(tail, tokens[tokens.length - 1]);
  // A cancel or a lost device carries the transcript so far, and where the run stopped.
  if (error instanceof CancelledError) error = new CancelledError(out.trim(), prefillMs > 0 ? 'decode' : 'prefill');
  else if (error instanceof DeviceLostError) error = error.withText(out.trim());
  const final = safeResidency(backend);
  backend.end(o.probe?.reusePrefill);
  const stats = transcriptionStats(r, acc, prefillMs, final, stoppedBy, stopToken);
  const words = wordsWithin(
    wordsFromFocus(tokens, focus, tok, c.audio.tokensPerSecond, r.audioSeconds),
    raw.trim(),
    out.trim(),
  );
  return { text: out.trim(), rawText: raw.trim(), words, tokens, stats, error };
}

function transcriptionStats(
  r: RunInput,
  acc: StepTotals,
  prefillMs: number,
  final: ReturnType<typeof safeResidency>,
  stoppedBy: TranscriptionStats['stoppedBy'],
  stopToken: number | undefined,
): TranscriptionStats {
  const decodeMs = acc.stepMs;
  const steps = Math.max(1, acc.steps);
  return {
    policy: r.policyName,
    budget: r.budget,
    backend: r.backend.label,
    audioSeconds: r.audioSeconds,
    audioTokens: r.audioLength,
    decodeSteps: acc.steps,
    stoppedBy,
    ...(stopToken !== undefined ? { stopToken } : {}),
    planLag: planLagOf(r.policy),
    kv: {
      rGpu: acc.steps ? acc.rGpu / acc.steps : (final?.rGpu ?? 0),
      rGpuPeak: acc.rGpuPeak,
      rGpuCpu: final?.rGpuCpu ?? 0,
      gpuKvBytes: final?.gpuBytesInUse ?? 0,
      cpuKvBytes: final?.cpuBytes ?? 0,
      textKvPages: final?.textPages ?? 0,
    },
    traffic: {
      mbPerStep: acc.bytes / steps / 1e6,
      mbPerStepMax: acc.bytesMax / 1e6,
      recallsPerStep: acc.recalls / steps,
      releasesPerStep: acc.releases / steps,
    },
    timing: {
      msPerToken: decodeMs / steps,
      prefillMs,
      encodeMs: r.encodeMs,
      realTimeFactor: (r.encodeMs + prefillMs + decodeMs) / 1000 / Math.max(1e-9, r.audioSeconds),
    },
  };
}

function residencyHook(b: DecoderBackend, step: number, hook: NonNullable<Probe['onResidency']>): void {
  const state = b.residencyState?.();
  if (!state)
    throw new WnwError('BAD_ARGUMENT', `onResidency needs a backend that exposes its residency (${b.label} does not)`);
  hook(step, (head, pos) => state.slotOf(head, pos) !== -1);
}

function safeResidency(b: DecoderBackend) {
  try {
    return b.residency();
  } catch {
    return undefined;
  }
}

/**
 * Per 2 s segment: the anchors' attention (`sums` as the device summed it, else from their
 * weights per position), and the share of tidal heads holding it whole on the GPU (the tide chart).
 */
function segmentView(
  sums: Float32Array | undefined,
  anchor: Float32Array | null,
  backend: DecoderBackend,
  tidal: readonly number[],
  seg: number,
  N: number,
): Pick<StepStats, 'anchorAttention' | 'tidalSegments'> {
  const segments = Math.ceil(N / seg);
  let anchorAttention = sums;
  if (anchor && !anchorAttention) {
    anchorAttention = new Float32Array(segments);
    for (let p = 0; p < N; p++) anchorAttention[Math.floor(p / seg)] += anchor[p];
  }
  let tidalSegments: Float32Array | undefined;
  const res = backend.residencyState?.();
  if (res && tidal.length > 0) {
    tidalSegments = new Float32Array(segments);
    for (const h of tidal) {
      for (let s = 0; s < segments; s++) {
        let full = true;
        for (let p = s * seg; p < Math.min(N, (s + 1) * seg) && full; p++) full = res.slotOf(h, p) >= 0;
        if (full) tidalSegments[s] += 1 / tidal.length;
      }
    }
  }
  return { anchorAttention, tidalSegments };
}
