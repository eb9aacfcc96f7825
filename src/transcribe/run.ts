/**
 * One transcription: encode, prefill, let the policy place the KV, then decode step by
 * step with the policy's recall/release plan applied between steps. Whatever happens
 * (cancel, error), the tokens decoded so far come back with the stats.
 */
import { CancelledError, DeviceLostError, WnwError } from '../errors.js';
import type { DecodeSession, DecoderBackend, StepResult } from '../backend/types.js';
import type { Readouts } from '../backend/readouts.js';
import { policyLayout } from '../kv/prompt.js';
import { sharedPrefillWindows } from '../policy/registry.js';
import type { LoadedModel } from '../model/loader.js';
import { planLagOf, type KvPolicy } from '../policy/types.js';
import { EMPTY_PLAN, type AttentionRequest, type LayerPrefill, type Move, type StepPlan } from '../kv/plan.js';
import type {
  Probe,
  ProgressEvent,
  StepStats,
  TranscribeOptions,
  TranscriptionResult,
  TranscriptionStats,
} from '../types.js';
import { wordsFromFocus, wordsWithin } from './timing.js';
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
  /**
   * A recording's session, placed by an earlier request and rewound to where this request
   * forks: the request feeds `feed` (its own prompt ids) from there instead of opening a
   * session and prefilling the audio again.
   */
  resume?: {
    session: DecodeSession;
    setup: DecodeSetup;
    feed: readonly number[];
    /** Instead of a `feed` (the placement's own prompt again, whose KV it kept): the token that prompt's last row predicted. */
    first?: number;
    /** The placement's `held`: the KV goes back to it, and the policy restarts, before the request's own steps. */
    held: Uint8Array;
    /**
     * `feed` is the placement's own prompt, whose rows a request since wrote over: its steps
     * run as the prefill ran those rows, every audio position in view (recalled from CPU
     * memory for them) and unobserved by the policy. Only where the session dropped nothing.
     */
    replay?: boolean;
  };
  /** Leaves the session open at the end for the recording's next request (RunOutcome.open). */
  keepOpen?: boolean;
}

/** A request's result, and for a recording the session it leaves open and what it wrote. */
export interface RunOutcome {
  result: TranscriptionResult;
  /** The session and its setup, open for the next request (`keepOpen`, and the run did not fail). */
  open?: { session: DecodeSession; setup: DecodeSetup };
  /** Positions of the prompt this request reused (its fork point) and prefilled (its own ids). */
  reusedPositions: number;
  prefilledPositions: number;
  /** The answer's ids whose KV is written (fed to a step), then the ones never fed (at most the last). */
  written: number[];
  pending: number[];
  /** Of a request that placed the audio (not a resumed one) and keeps its session open: its placement. */
  placement?: Placement;
}

/** What a request's prefill left: the first token its prompt's last row predicted, what it dropped, and what the GPU held when decoding began. */
export interface Placement {
  first: number;
  /** Audio positions kept in neither GPU nor CPU memory, summed over heads (`lostPositions`). */
  lost: number;
  /** Per KV head, per audio position (head-major): 1 where it was on the GPU at the first decode step (`heldPositions`). */
  held: Uint8Array;
}

/**
 * Audio positions, summed over KV heads, a session holds neither on the GPU nor in CPU
 * memory: what its policy dropped, which no later request can get back.
 */
export function lostPositions(session: Pick<DecodeSession, 'residency'>, audioLength: number): number {
  let lost = 0;
  for (const kept of session.residency().gpuOrCpuPerHead) lost += audioLength - kept;
  return lost;
}

/** Per KV head, per audio position (head-major): 1 where the session holds it on the GPU now. */
export function heldPositions(session: DecodeSession, audioLength: number): Uint8Array {
  const heads = session.residency().gpuPerHead.length;
  const state = session.residencyState();
  const held = new Uint8Array(heads * audioLength);
  for (let h = 0; h < heads; h++)
    for (let p = 0; p < audioLength; p++) if (state.slotOf(h, p) >= 0) held[h * audioLength + p] = 1;
  return held;
}

/**
 * The plan that makes the session's GPU audio what `held` says (every position where
 * `held` is 1 when `held` is null): releases what a request recalled since, recalls what it
 * released (both have CPU copies where the session lost nothing since `held` was taken).
 */
function planTo(session: DecodeSession, held: Uint8Array | null, audioLength: number): StepPlan {
  const heads = session.residency().gpuPerHead.length;
  const state = session.residencyState();
  const recall: Move[] = [];
  const release: Move[] = [];
  for (let h = 0; h < heads; h++) {
    const back: number[] = [];
    const out: number[] = [];
    for (let p = 0; p < audioLength; p++) {
      const want = held ? held[h * audioLength + p] === 1 : true;
      const on = state.slotOf(h, p) >= 0;
      if (want && !on) back.push(p);
      else if (!want && on) out.push(p);
    }
    if (back.length) recall.push({ head: h, positions: Int32Array.from(back) });
    if (out.length) release.push({ head: h, positions: Int32Array.from(out) });
  }
  return recall.length || release.length ? { recall, release } : EMPTY_PLAN;
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

/**
 * Opens the backend's session, runs the prefill and places the KV (layer by layer where the
 * policy answers per layer): the first token and the decode session. `onOpen` gets the
 * session's close as soon as it is open, so a failure anywhere after frees it.
 */
async function openSession(
  r: RunInput,
  h: DecodeSetup,
  onOpen: (close: (keepPrefill?: boolean) => void) => void,
): Promise<{ first: number; session: DecodeSession }> {
  const { backend, policy, options: o } = r;
  // A policy that answers per layer lets the backend hold one layer's prompt KV at a time.
  const byLayer = policy.prefillByLayer?.(h.layout);
  // A prefill kept for the next policy on the clip scores the windows the others read too.
  const alsoScore = o.probe?.reusePrefill ? { alsoScore: sharedPrefillWindows(h.layout) } : {};
  const opts = {
    audioLength: r.audioLength,
    // The pipelined loop queues one step past the last it reads: one more position.
    maxNewTokens: h.maxNew + (h.lag === 2 ? 2 : 1),
    request: { ...h.request, ...alsoScore },
    readouts: h.readouts,
    returnLogits: Boolean(o.probe?.onLogits),
    reusePrefill: o.probe?.reusePrefill,
    ...(r.prompt ? { prompt: r.prompt } : {}),
  };
  const progressed = async () => {
    r.progress({ phase: 'prefill', fraction: 0 });
    await yieldToEventLoop();
    if (o.signal?.aborted) throw new CancelledError();
  };
  if (byLayer) {
    const stage = backend.openByLayer(opts);
    onOpen(() => stage.close());
    await progressed();
    const run = layerByLayer(byLayer, r.model.config.numLayers, o.signal, r.progress);
    const done = await stage.prefill(r.embeddings, run);
    onOpen((keep) => done.session.close(keep));
    return { first: done.token, session: done.session };
  }
  const stage = backend.open(opts);
  onOpen(() => stage.close());
  await progressed();
  const pre = await stage.prefill(r.embeddings);
  if (o.signal?.aborted) throw new CancelledError();
  const session = await pre.place(policy.prefill(pre.observation));
  onOpen((keep) => session.close(keep));
  return { first: pre.token, session };
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
    ...(run.fitting ? { fitting: run.fitting } : {}),
  };
}

/**
 * Feeds a resumed request's own prompt ids one step each, the policy observing every step
 * as in decoding (an anchor's attention to the question recalls what it points at), and
 * returns the greedy token after the last: the answer's first.
 */
async function feedPrompt(r: RunInput, session: DecodeSession, ids: readonly number[], acc: StepTotals) {
  let token = -1;
  for (const id of ids) {
    if (r.options.signal?.aborted) throw new CancelledError();
    const res = await session.step(id);
    const moved = await session.apply(r.policy.afterStep(res.observation));
    acc.bytes += moved.bytesToGpu;
    acc.recalls += moved.recalledPositions;
    acc.releases += moved.releasedPositions;
    token = res.token;
  }
  return token;
}

/**
 * A resumed request back at the placement's state: for a `replay`, its prompt's rows written
 * as the prefill wrote them (every audio position on the GPU, no plan between the steps);
 * then the KV as it was at the first decode step and the policy restarted. Returns the
 * replay's first token (undefined without one).
 */
async function backToPlacement(
  r: RunInput,
  resume: NonNullable<RunInput['resume']>,
  acc: StepTotals,
): Promise<number | undefined> {
  const { session } = resume;
  const count = (moved: { bytesToGpu: number; recalledPositions: number; releasedPositions: number }) => {
    acc.bytes += moved.bytesToGpu;
    acc.recalls += moved.recalledPositions;
    acc.releases += moved.releasedPositions;
  };
  let token: number | undefined;
  if (resume.replay) {
    count(await session.apply(planTo(session, null, r.audioLength)));
    for (const id of resume.feed) {
      if (r.options.signal?.aborted) throw new CancelledError();
      token = (await session.step(id)).token;
    }
  }
  r.policy.restart?.();
  count(await session.apply(planTo(session, resume.held, r.audioLength)));
  return token;
}

/** What the decode asks of the backend each step, and how its loop runs. */
export interface DecodeSetup {
  maxNew: number;
  layout: ReturnType<typeof policyLayout>;
  /** The policy's request, and the readouts word timing, the tide chart and evaluation read beside it. */
  request: AttentionRequest;
  readouts: Readouts;
  /**
   * 2: step t + 1 is queued before step t is read (KvPolicy.planLag 2); its token never
   * leaves the device and the policy's plan applies a step later. 1: each step is read
   * before the next is queued.
   */
  lag: 1 | 2;
  /**
   * A policy at planLag 2 run in the waiting loop (teacher forcing): the plan held back a
   * step, so its plans apply two steps after the step they read, as in the pipelined loop.
   */
  heldPlan: { plan: StepPlan } | null;
}

/**
 * The most tokens a request may generate from sequence position `start` (where its answer's
 * first token is fed): teacher forcing runs exactly one step per forced token, so the length
 * guard never cuts it; never past the model's positions.
 */
function maxNewFrom(r: RunInput, start: number): number {
  const forced = r.options.probe?.forcedTokens;
  if (forced) return forced.length + 1;
  const positionsLeft = Math.max(1, r.model.config.maxPositions - start);
  return Math.min(positionsLeft, r.options.maxNewTokens ?? defaultMaxNewTokens(r.audioSeconds));
}

function setUpDecode(r: RunInput): DecodeSetup {
  const { model, policy, options: o } = r;
  const c = model.config;
  const N = r.audioLength;
  const forced = o.probe?.forcedTokens;
  const prompt = r.prompt ?? c;
  const maxNew = maxNewFrom(r, promptLength(prompt, N));
  const layout = policyLayout(c, N, prompt);
  const request = policy.request(layout);
  const timing = r.timingHeads.length ? { focus: r.timingHeads } : {};
  const readouts: Readouts = {
    ...timing,
    // The tide chart reads the anchors' attention per segment (a recording's session reads it
    // for every request, so one with a chart and one without share the session).
    ...((o.onStep || r.keepOpen) && r.timingHeads.length ? { segmentSums: r.timingHeads } : {}),
    // Evaluation may ask for every head's attention: the policy still sees only its own heads.
    ...(o.probe?.onAttention
      ? { attention: Array.from({ length: layout.numLayers * layout.numKvHeads }, (_, h) => h) }
      : {}),
  };
  // The pipelined loop applies a plan two steps after the step it read: only where the policy allows it.
  const lag = !forced && planLagOf(policy) >= 2 ? 2 : 1;
  return {
    maxNew,
    layout,
    request,
    readouts,
    lag,
    heldPlan: lag === 1 && planLagOf(policy) >= 2 ? { plan: EMPTY_PLAN } : null,
  };
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
 * A step read back (fed `token`, started at `ts`): its observers told, the policy's plan
 * applied. Returns the token it predicts and the anchors' focus that dates it (-1 without anchors).
 */
async function observeStep(
  r: RunInput,
  h: DecodeSetup,
  session: DecodeSession,
  token: number,
  res: StepResult,
  text: string,
  acc: StepTotals,
  ts: number,
): Promise<{ next: number; focus: number }> {
  const { policy, options: o } = r;
  const N = r.audioLength;
  const obs = res.observation;
  const probe = o.probe;
  // The request's own step (a recording's session counts the steps of every request before it).
  const step = acc.steps;
  if (res.logits) probe?.onLogits?.(step, res.logits);
  if (obs.attention) probe?.onAttention?.(step, obs.attention);
  if (probe?.onResidency) residencyHook(session, step, probe.onResidency);
  let stepPlan = policy.afterStep(obs);
  if (h.heldPlan) {
    // A two-step lag in the waiting loop (teacher forcing): this plan waits one step, as it would pipelined.
    [stepPlan, h.heldPlan.plan] = [h.heldPlan.plan, stepPlan];
  }
  const moved = await session.apply(stepPlan);
  const ms = now() - ts;
  // This step's attention predicts res.token, so its anchor focus dates that token.
  const f = obs.focus ?? -1;
  const st = session.residency();
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
      anchorAttention: obs.segmentSums,
      tidalSegments: tidalSegments(session, r.tidalHeads, segmentLength(r.model.config), N),
    });
  }
  r.progress({ phase: 'decode', fraction: f >= 0 ? Math.min(1, f / N) : Math.min(1, acc.steps / h.maxNew) });
  return { next: res.token, focus: f };
}

export async function runTranscription(r: RunInput): Promise<TranscriptionResult> {
  return (await runRequest(r)).result;
}

/** One request: a session opened and prefilled (or a recording's resumed), then decoded. */
export async function runRequest(r: RunInput): Promise<RunOutcome> {
  const { model, options: o } = r;
  const c = model.config;
  const forced = o.probe?.forcedTokens;
  const resume = r.resume;
  const start = resume ? resume.session.position + resume.feed.length : promptLength(r.prompt ?? c, r.audioLength);
  const h: DecodeSetup = resume
    ? { ...resume.setup, maxNew: maxNewFrom(r, start), heldPlan: resume.setup.heldPlan && { plan: EMPTY_PLAN } }
    : setUpDecode(r);
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
  let close: (keepPrefill?: boolean) => void = resume ? (keep) => resume.session.close(keep) : () => {};
  let session: DecodeSession | undefined = resume?.session;
  /** Steps queued in the decode loop: the answer's tokens fed, in order (then a step past a stop). */
  let submits = 0;
  let placement: Placement | undefined;
  try {
    let first: number;
    if (resume) {
      r.progress({ phase: 'prefill', fraction: 0, detail: `${resume.feed.length} positions of its own` });
      const replayed = await backToPlacement(r, resume, acc);
      first = replayed ?? resume.first ?? (await feedPrompt(r, resume.session, resume.feed, acc));
    } else {
      const opened = await openSession(r, h, (c) => (close = c));
      session = opened.session;
      first = opened.first;
      const initial = r.policy.afterPrefill?.();
      if (initial && (initial.recall.length || initial.release.length)) {
        // Counted with the decode steps' traffic: it is a recall, made before the first of them.
        const moved = await session.apply(initial);
        acc.bytes += moved.bytesToGpu;
        acc.recalls += moved.recalledPositions;
        acc.releases += moved.releasedPositions;
      }
      // A recording's next request starts from here; a session closed after this request needs none of it.
      if (r.keepOpen)
        placement = { first, lost: lostPositions(session, r.audioLength), held: heldPositions(session, r.audioLength) };
    }
    const live = session!;
    prefillMs = now() - t0;
    r.progress({ phase: 'prefill', fraction: 1 });
    let token = forced ? (forced[0] ?? c.tokens.eos) : first;
    if (!isStop(c, token)) emit(token, -1);
    let lastYield = now();
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
    // At lag 2 step t + 1 is queued before step t is read: its token never leaves the GPU, and
    // the CPU learns it (and sees a stop) one step late; the step queued past a stop is discarded.
    // At lag 1 each step is fed from the CPU and read before the next.
    let ahead = false;
    while (!isStop(c, token) && (await mayStep())) {
      const ts = now();
      if (!ahead) {
        live.submit(token);
        submits++;
      }
      if (h.lag === 2) {
        live.submit(null);
        submits++;
      }
      ahead = h.lag === 2;
      const step = await observeStep(r, h, live, token, await live.read(), out, acc, ts);
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
  const final = session ? safeResidency(session) : undefined;
  // A recording keeps its session through a cancel (the next request rewinds past what it left), not a failure.
  const keep = r.keepOpen && session && (!error || error instanceof CancelledError);
  if (!keep) close(o.probe?.reusePrefill);
  const prompt = {
    reusedPositions: resume ? start - resume.feed.length : 0,
    prefilledPositions: resume ? resume.feed.length : start,
  };
  const stats = { ...transcriptionStats(r, acc, prefillMs, final, stoppedBy, stopToken), prompt };
  const words = wordsWithin(
    wordsFromFocus(tokens, focus, tok, c.audio.tokensPerSecond, r.audioSeconds),
    raw.trim(),
    out.trim(),
  );
  const fed = Math.min(submits, tokens.length);
  return {
    result: { text: out.trim(), rawText: raw.trim(), words, tokens, stats, error },
    ...(keep ? { open: { session: session!, setup: h } } : {}),
    ...prompt,
    written: tokens.slice(0, fed),
    pending: tokens.slice(fed),
    ...(placement ? { placement } : {}),
  };
}

function transcriptionStats(
  r: RunInput,
  acc: StepTotals,
  prefillMs: number,
  final: ReturnType<typeof safeResidency>,
  stoppedBy: TranscriptionStats['stoppedBy'],
  stopToken: number | undefined,
): Omit<TranscriptionStats, 'prompt'> {
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

function residencyHook(session: DecodeSession, step: number, hook: NonNullable<Probe['onResidency']>): void {
  const state = session.residencyState();
  hook(step, (head, pos) => state.slotOf(head, pos) !== -1);
}

function safeResidency(session: DecodeSession) {
  try {
    return session.residency();
  } catch {
    return undefined;
  }
}

/** Per 2 s segment: the share of tidal heads holding it whole on the GPU (the tide chart). */
function tidalSegments(
  session: DecodeSession,
  tidal: readonly number[],
  seg: number,
  N: number,
): Float32Array | undefined {
  if (tidal.length === 0) return undefined;
  const res = session.residencyState();
  const segments = Math.ceil(N / seg);
  const out = new Float32Array(segments);
  for (const h of tidal) {
    for (let s = 0; s < segments; s++) {
      let full = true;
      for (let p = s * seg; p < Math.min(N, (s + 1) * seg) && full; p++) full = res.slotOf(h, p) >= 0;
      if (full) out[s] += 1 / tidal.length;
    }
  }
  return out;
}
