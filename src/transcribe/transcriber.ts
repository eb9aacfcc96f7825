/**
 * The transcriber: model + audio route + backend, loaded once; each `transcribe` call turns
 * audio into text under the chosen KV policy. Audio is decoded here, featurised and
 * encoded by the model's audio route (route/audio-route.ts), and decoded in run.ts.
 */
import { CancelledError, DeviceLostError, PositionsExceededError, WnwError } from '../errors.js';
import { toMono16k } from '../audio/decode.js';
import { createAudioRoute } from '../route/audio-route.js';
import type { AudioRoute } from '../route/types.js';
import { chooseBackend, createBackend, type BackendTarget } from '../backend/create.js';
import type { PackedWeightSource } from '../model/packed-source.js';
import { lostWithin } from '../backend/cancel.js';
import { availableHostMemory } from '../backend/cpu/host-memory.js';
import {
  audioTokensOf,
  maxAudioTokens,
  refuseHostUnfit,
  refuseUnfit,
  reportedDeviceMemoryGiB,
  sureMemoryBytes,
  type FitDevice,
} from '../backend/webgpu/fit.js';
import type { DecoderBackend } from '../backend/types.js';
import type { GpuContext } from '../gpu/device.js';
import { loadModel, type LoadedModel } from '../model/loader.js';
import { promptLength, type ModelConfig, type PromptIds } from '../model/config.js';
import { statedLimitWarnings } from '../model/families/limits.js';
import { decoderWeightBytes, packDecoderWeights, type PackedDecoderWeights } from '../model/packed-weights.js';
import type { WeightFormat } from '../model/quant.js';
import type { DecoderWeights } from '../model/weights.js';
import { followUpFor, promptForLanguage } from './prompt-language.js';
import { languageCode } from '../model/text/language.js';
import { createPolicy, needsHeads, policyBudget } from '../policy/registry.js';
import { wordTimingHeads } from '../policy/timing-heads.js';
import { runRequest, runTranscription, type RunInput, type RunOutcome } from './run.js';
import { WnwLiveRecording, type LiveHost, type LiveOptions } from './live.js';
import { checkLoadOptions, checkRecordingOptions, checkTranscribeOptions, show } from './options.js';
import {
  WnwRecording,
  type Conversation,
  type RecordingHost,
  type RequestPrompt,
  type Resumption,
} from './recording.js';
import { sessionPrompt } from '../kv/prompt.js';
import { calibrateOn } from './calibrate.js';
import type { PartialStore } from '../calibrate/runtime.js';
import { conversationSystem } from '../model/text/index.js';
import type {
  AudioInput,
  CalibrateOptions,
  Calibration,
  CalibrationClip,
  LoadOptions,
  PolicyName,
  ProgressEvent,
  ProgressPhase,
  RecordingOptions,
  TranscribeOptions,
  TranscriptionResult,
  Transcriber,
  ModelInfo,
} from '../types.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/** What runs the model: the decoder backend and the audio route beside it (on its device). */
export interface Engine {
  decoder: DecoderBackend;
  route: AudioRoute;
}

export class WnwTranscriber implements Transcriber {
  private busy: Promise<unknown> = Promise.resolve();
  private disposed = false;
  /** Set when the GPU device was lost: the next call builds the engine again on a new device. */
  private lost = false;
  /** The last encoding, kept when the caller asked for reuse (evaluation: many policies, one clip). */
  private lastEncoding: { input: AudioInput; enc: Awaited<ReturnType<WnwTranscriber['encode']>> } | null = null;
  private route: AudioRoute;
  private decoder: DecoderBackend;

  constructor(
    readonly model: LoadedModel,
    engine: Engine,
    private readonly defaults: {
      policy: PolicyName;
      budget: number;
      language?: string;
      onProgress?: (e: ProgressEvent) => void;
      /** Why 'auto' chose the CPU, when it did (Transcriber.backendReason). */
      backendReason?: string;
    },
    /** Builds the engine again from the loaded model (after a lost device); absent: a loss is final. */
    private readonly remake?: () => Promise<Engine>,
  ) {
    this.route = engine.route;
    this.decoder = engine.decoder;
  }

  /** Prompts of the languages asked for since load, built once each. */
  private readonly prompts = new Map<string, PromptIds>();

  /** What turns audio into embeddings for this model, and where (e.g. "voxtral Whisper encoder (WebGPU, f32)"). */
  get audioRoute(): string {
    return this.route.label;
  }

  get backend(): string {
    return this.decoder.label;
  }

  get backendReason(): string | null {
    return this.decoder.kind === 'cpu' ? (this.defaults.backendReason ?? null) : null;
  }

  get backendKind(): 'cpu' | 'webgpu' {
    return this.decoder.kind;
  }

  /** Transcriptions run one at a time (the backend holds one session). */
  transcribe(input: AudioInput, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    return this.serial(() => this.transcribeNow(input, options));
  }

  /** Encodes `input` and keeps it for many requests (recording.ts); disposes the recording opened before. */
  open(input: AudioInput, options: RecordingOptions = {}): Promise<WnwRecording> {
    return this.serial(() => this.openNow(input, options));
  }

  /**
   * A live recording (live.ts): audio appended as it comes, a hypothesis each tick, the
   * words two agree on committed; a hypothesis attends a bounded window of the audio.
   */
  live(options: LiveOptions = {}): WnwLiveRecording {
    return new WnwLiveRecording(this.liveHost(options), options);
  }

  /** What a live recording runs on this transcriber: its hypotheses, and the recording it opens at stop. */
  liveHost(options: LiveOptions = {}): LiveHost {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', 'this transcriber was disposed; load a new one');
    const {
      onText: _onText,
      tickSeconds: _tick,
      hypothesisTokens: _tokens,
      maxLagSeconds: _lag,
      windowSeconds: _window,
      policy,
      budget,
      policyOptions,
      ...rest
    } = options;
    const placing = {
      ...(policy ? { policy } : {}),
      ...(budget !== undefined ? { budget } : {}),
      ...(policyOptions ? { policyOptions } : {}),
    };
    checkTranscribeOptions({ ...rest, ...placing });
    // A policy the options cannot make is refused now, not at stop.
    this.policyFor(placing);
    // A window's KV is small and held whole: the policy places the recording opened at stop.
    const request = { ...rest, policy: 'full' as const };
    const c = this.model.config;
    return {
      sampleRate: c.audio.sampleRate,
      tokenizer: this.model.text ?? this.model.tokenizer,
      replyWrappers: this.model.family?.replyWrappers ?? [],
      hypothesis: (samples, committed, maxNewTokens) =>
        this.serial(async () => {
          if (this.lost) await this.rebuild();
          const enc = await this.encode(samples, {});
          const language = request.language !== undefined ? languageCode(request.language) : this.defaults.language;
          const base = (await this.promptFor(language, {})) ?? c;
          const prompt = { prefix: base.prefix, instruction: [...base.instruction, ...committed] };
          this.recording?.drop();
          const res = await runTranscription(
            this.runInput(prompt, this.runParts(request), enc, {
              ...request,
              ...(maxNewTokens !== undefined ? { maxNewTokens } : {}),
            }),
          );
          this.finishStats(res, enc.audioSeconds);
          return res;
        }),
      open: (samples) => this.serial(() => this.openNow(samples, {}, placing)),
    };
  }

  /**
   * The head triage on this transcriber's backend (calibrate.ts): each clip is one job of the
   * queue. `store` keeps finished clips where the caller says (the CLI's file); omitted, in
   * the browser's storage where there is one.
   */
  calibrate(clips: CalibrationClip[], options: CalibrateOptions = {}, store?: PartialStore): Promise<Calibration> {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', 'this transcriber was disposed; load a new one');
    const language = options.language !== undefined ? languageCode(options.language) : this.defaults.language;
    const prompt = this.promptFor(language, {});
    prompt.catch(() => {}); // awaited by the first clip
    return calibrateOn(
      {
        model: this.model,
        encode: (samples) => this.route.encode(samples),
        triage: async (embeddings, audioLength, answer) => {
          const p = await prompt;
          // The backend holds one session: the recording's, if one is open, is closed by the triage's.
          this.recording?.drop();
          return this.decoder.triage(embeddings, audioLength, answer, p);
        },
        serial: (job) => this.serial(job),
      },
      clips,
      options,
      store,
    );
  }

  /** Runs `job` after every call queued before it: the backend holds one session. */
  private serial<T>(job: () => Promise<T>): Promise<T> {
    const run = this.busy.then(job);
    this.busy = run.catch(() => undefined);
    return run;
  }

  /** The recording open on this transcriber (it keeps one). */
  private recording: WnwRecording | null = null;

  private async openNow(
    input: AudioInput,
    o: RecordingOptions,
    defaults?: ConstructorParameters<typeof WnwRecording>[3],
  ): Promise<WnwRecording> {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', 'this transcriber was disposed; load a new one');
    checkRecordingOptions(o);
    if (o.signal?.aborted) throw new CancelledError('', 'encode');
    this.recording?.dispose('this recording was disposed: its transcriber opened another (it keeps one recording)');
    if (this.lost) await this.rebuild();
    let enc: Awaited<ReturnType<WnwTranscriber['encode']>>;
    try {
      enc = await this.encode(input, o);
    } catch (e) {
      throw (await this.deviceLost(e)) ?? e;
    }
    const rec = new WnwRecording(this.recordingHost(), enc, o.system, defaults);
    this.recording = rec;
    return rec;
  }

  /** What a recording asks of this transcriber. */
  private recordingHost(): RecordingHost {
    return {
      model: this.model,
      serial: (job) => this.serial(job),
      run: (rec, prompt, options, resume, encodeMs) => this.runOnRecording(rec, prompt, options, resume, encodeMs),
      sessionKey: (o) => this.sessionKey(o),
      promptOf: (language, p, system) => this.recordingPrompt(language, p, system),
      followUp: (question, system) =>
        followUpFor(this.model, question, system !== undefined ? system : this.conversationSystem()),
      release: (rec) => {
        if (this.recording === rec) this.recording = null;
      },
    };
  }

  private conversationSystem(): string | null {
    return this.model.family ? conversationSystem(this.model.family.prompt) : null;
  }

  /** A recording's request prompt: its task's (or question's) with the recording's system message. */
  private async recordingPrompt(
    language: string | undefined,
    p: RequestPrompt,
    system: string | null | undefined,
  ): Promise<PromptIds> {
    const lang = language !== undefined ? languageCode(language) : this.defaults.language;
    if (p.kind === 'transcribe' && lang === this.defaults.language && !this.model.family)
      return sessionPrompt(this.model.config, {});
    const task =
      p.kind === 'translate'
        ? { task: 'translate' as const, targetLanguage: p.targetLanguage }
        : p.kind === 'ask'
          ? { question: p.question }
          : {};
    return promptForLanguage(this.model, lang, {
      ...task,
      system: system !== undefined ? system : this.conversationSystem(),
    });
  }

  /** What a request's options must share with the session they reuse: the policy, its options and the evaluation's readouts. */
  private sessionKey(o: TranscribeOptions): string {
    const policy = o.policy ?? this.defaults.policy;
    const probe = o.probe;
    return JSON.stringify([
      policy,
      policyBudget(policy, o.budget ?? this.defaults.budget),
      o.policyOptions ?? null,
      !!probe?.onAttention,
      !!probe?.onLogits,
      !!probe?.forcedTokens,
    ]);
  }

  private async runOnRecording(
    rec: WnwRecording,
    prompt: PromptIds,
    options: TranscribeOptions,
    resume: Resumption | undefined,
    encodeMs: number,
  ): Promise<RunOutcome & { key: string; policy: Conversation['policy'] }> {
    checkTranscribeOptions(options);
    if (options.signal?.aborted) throw new CancelledError('', 'prefill');
    // After a lost device the conversation is gone (deviceLost dropped it): this request prefills again.
    if (this.lost) await this.rebuild();
    const parts = resume ? resume.conversation.policy : this.runParts(options);
    try {
      const enc = rec.encoding;
      const out = await runRequest({
        ...this.runInput(prompt, parts, { ...enc, encodeMs }, options),
        keepOpen: true,
        ...(resume
          ? {
              resume: {
                session: resume.conversation.session,
                setup: resume.conversation.setup,
                feed: resume.feed,
                held: resume.conversation.placement.held,
                ...(resume.first !== undefined ? { first: resume.first } : {}),
                ...(resume.replay ? { replay: true } : {}),
              },
            }
          : {}),
      });
      this.finishStats(out.result, enc.audioSeconds);
      const r = out.result;
      if (r.error && !(r.error instanceof CancelledError)) {
        const lost = await this.deviceLost(r.error);
        if (lost) r.error = lost.withText(r.text);
      }
      return { ...out, key: this.sessionKey(options), policy: parts };
    } catch (e) {
      throw (await this.deviceLost(e)) ?? e;
    }
  }

  /** The loaded model's share of a run's stats: the encoder's bytes and the model card's limits. */
  private finishStats(res: TranscriptionResult, audioSeconds: number): void {
    res.stats.encoderBytes = this.route.weightBytes;
    const warnings = statedLimitWarnings(this.model.family, audioSeconds);
    if (warnings.length) res.stats.warnings = warnings;
  }

  /** A request on this transcriber's model and backend: `enc`'s audio under `parts`' policy. */
  private runInput(
    prompt: PromptIds | undefined,
    parts: Conversation['policy'],
    enc: Pick<RunInput, 'embeddings' | 'audioLength' | 'audioSeconds' | 'encodeMs'>,
    options: TranscribeOptions,
  ): RunInput {
    return {
      model: this.model,
      backend: this.decoder,
      ...(prompt ? { prompt } : {}),
      ...parts,
      embeddings: enc.embeddings,
      audioLength: enc.audioLength,
      audioSeconds: enc.audioSeconds,
      encodeMs: enc.encodeMs,
      options,
      progress: options.onProgress ?? this.defaults.onProgress ?? (() => {}),
    };
  }

  /** A run's policy and the heads that date its words and draw its tide chart. */
  private runParts(options: TranscribeOptions): Conversation['policy'] {
    const { policyName, budget, policy } = this.policyFor(options);
    return {
      policyName,
      budget,
      policy,
      timingHeads: wordTimingHeads(policy, this.model.heads, budget),
      tidalHeads: policy.headRoles?.tidal ?? [],
    };
  }

  /** Audio → embeddings, exposed for evaluation (one encoding, many policies). */
  async encode(input: AudioInput, options: Pick<TranscribeOptions, 'signal' | 'onProgress'> = {}) {
    const c = this.model.config;
    const samples = await toMono16k(input as never, c.audio.sampleRate);
    const seconds = samples.length / c.audio.sampleRate;
    // The model's positions are known from its config and the clip's tokens from its length:
    // a prompt past them is refused here, before the encoder spends minutes on it.
    refusePastPositions(c, this.model.base, seconds);
    const t0 = now();
    const progress = options.onProgress ?? this.defaults.onProgress;
    progress?.({ phase: 'encode', fraction: 0, detail: this.route.label });
    const out = await this.route
      .encode(samples, {
        signal: options.signal,
        onProgress: (done: number, total: number, note?: string) =>
          progress?.({ phase: 'encode', fraction: done / total, ...(note ? { detail: note } : {}) }),
      })
      .catch((e: unknown) => {
        // The route checks the signal between windows and knows no phases: its cancel is the encode's.
        throw e instanceof CancelledError && !e.phase ? new CancelledError('', 'encode') : e;
      });
    return { ...out, audioSeconds: seconds, encodeMs: now() - t0, encoderBytes: this.route.weightBytes };
  }

  /** Runs the decoder on already-encoded audio (evaluation shares one encoding across policies). */
  async decodeEncoded(
    enc: Awaited<ReturnType<WnwTranscriber['encode']>>,
    options: TranscribeOptions = {},
  ): Promise<TranscriptionResult> {
    const parts = this.runParts(options);
    // A call's language ("none" included) replaces the load-time one; omitted, that one holds.
    const prompt = await this.promptFor(
      options.language !== undefined ? languageCode(options.language) : this.defaults.language,
      options,
    );
    // The backend holds one session: the recording's, if one is open, is closed by this run's.
    this.recording?.drop();
    const res = await runTranscription(this.runInput(prompt, parts, enc, options));
    this.finishStats(res, enc.audioSeconds);
    return res;
  }

  /**
   * The prompt for the language code `language` (undefined: none) and the call's task,
   * handed to the run (the config keeps the load-time one, which serves the load-time
   * language's transcription): undefined where that is the prompt.
   */
  private async promptFor(
    language: string | undefined,
    o: Pick<TranscribeOptions, 'task' | 'targetLanguage'>,
  ): Promise<PromptIds | undefined> {
    const task = {
      task: o.task ?? 'transcribe',
      ...(o.targetLanguage !== undefined ? { targetLanguage: o.targetLanguage } : {}),
    };
    if (language === this.defaults.language && task.task === 'transcribe' && o.targetLanguage === undefined)
      return undefined;
    const key = JSON.stringify([language ?? '', task.task, o.targetLanguage ?? '']);
    let p = this.prompts.get(key);
    if (!p) {
      p = await promptForLanguage(this.model, language, task);
      this.prompts.set(key, p);
    }
    return p;
  }

  /** The run's policy, made from the options: a policy the options cannot make is refused here, before any audio is read. */
  private policyFor(options: TranscribeOptions): {
    policyName: PolicyName;
    budget: number;
    policy: ReturnType<typeof createPolicy>;
  } {
    const policyName = options.policy ?? this.defaults.policy;
    const budget = policyBudget(policyName, options.budget ?? this.defaults.budget);
    const heads = this.model.heads;
    if (needsHeads(policyName) && !heads) {
      throw new WnwError('BAD_ARGUMENT', missingHeads(policyName, this.model.base));
    }
    return { policyName, budget, policy: createPolicy(policyName, { ...options.policyOptions, budget, heads }) };
  }

  private async transcribeNow(input: AudioInput, options: TranscribeOptions): Promise<TranscriptionResult> {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', 'this transcriber was disposed; load a new one');
    checkTranscribeOptions(options);
    if (options.signal?.aborted) throw new CancelledError('', 'encode');
    // Options that make no policy fail now, not after the audio has been encoded.
    this.policyFor(options);
    if (this.lost) await this.rebuild();
    try {
      const reusePrefill = options.probe?.reusePrefill;
      const reuse = reusePrefill && this.lastEncoding?.input === input ? this.lastEncoding.enc : null;
      const enc = reuse ?? (await this.encode(input, options));
      this.lastEncoding = reusePrefill ? { input, enc } : null;
      const r = await this.decodeEncoded(enc, options);
      if (r.error && !(r.error instanceof CancelledError)) {
        const lost = await this.deviceLost(r.error);
        if (lost) r.error = lost.withText(r.text);
      }
      return r;
    } catch (e) {
      throw (await this.deviceLost(e)) ?? e;
    }
  }

  /**
   * The typed loss when `e` came from a lost device (the device's `lost` promise may settle
   * just after the failed map or submit that revealed it, so it is given a moment); null if not.
   */
  private async deviceLost(e: unknown): Promise<DeviceLostError | null> {
    const ctx = gpuContextOf(this.decoder);
    if (!ctx || this.lost) return null;
    const info = await lostWithin(ctx, 100);
    if (!info && !(e instanceof DeviceLostError)) return null;
    // The old engine's buffers are freed now, not at the next call: a page that never calls again leaks nothing.
    this.lost = true;
    this.lastEncoding = null;
    this.recording?.drop();
    this.freeEngine();
    return e instanceof DeviceLostError ? e : new DeviceLostError(`${info!.reason}: ${info!.message}`);
  }

  /** After a lost device: the decoder and route built again on a new device (the old ones were freed when the loss was seen). */
  private async rebuild(): Promise<void> {
    if (!this.remake)
      throw new DeviceLostError('the device this transcriber was built on is gone; load the model again');
    const e = await this.remake();
    this.decoder = e.decoder;
    this.route = e.route;
    this.engineFreed = false;
    this.lost = false;
  }

  /** Frees the decoder and route, once (a lost engine is freed when the loss is seen, and not again by dispose). */
  private freeEngine(): void {
    if (this.engineFreed) return;
    this.engineFreed = true;
    this.decoder.dispose();
    void Promise.resolve(this.route.dispose()).catch(() => {});
  }

  private engineFreed = false;

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.lastEncoding = null;
    this.recording?.dispose('this recording was disposed with its transcriber; load a new one');
    this.freeEngine();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.dispose();
  }

  get modelInfo(): ModelInfo {
    const { config, family, heads } = this.model;
    const recipe = family?.prompt;
    return {
      name: config.name,
      family: family?.modelType ?? null,
      maxAudioSeconds: maxAudioTokens(config) / config.audio.tokensPerSecond,
      can: { ask: !!recipe, translate: !!recipe?.translation },
      heads: !!heads,
      audioRoute: this.route.label,
    };
  }
}

/** A recording whose prompt passes the model's positions, as the fit verdicts count its tokens. */
function refusePastPositions(c: ModelConfig, base: string, seconds: number): void {
  const audioTokens = audioTokensOf(c, seconds);
  const fit = maxAudioTokens(c);
  if (audioTokens <= fit) return;
  const minutes = Math.max(0, fit) / c.audio.tokensPerSecond / 60;
  throw new PositionsExceededError(
    promptLength(c, audioTokens),
    c.maxPositions,
    minutes,
    `${base}/config.json: a ${(seconds / 60).toFixed(1)} min recording (${audioTokens} audio tokens)`,
  );
}

/** The WebGPU decoder's device, which the audio encoder shares; undefined on the CPU. */
function gpuContextOf(decoder: DecoderBackend): GpuContext | undefined {
  return decoder.kind === 'webgpu' && 'ctx' in decoder ? (decoder as { ctx: GpuContext }).ctx : undefined;
}

/** A policy that triages heads without the calibrated heads.json: what to run instead. */
function missingHeads(policy: string, model: string): string {
  return (
    `policy "${policy}" needs the calibrated heads.json in ${model}, which is missing: ` +
    `run \`npm run calibrate -- --model ${model}\` to write it, or use policy "full"`
  );
}

/**
 * Our own folders' f32 decoder packed to f16/q4 here rather than inside a backend, so the
 * conversion is a phase of its own in the progress (both backends take packed weights as
 * they are and compute with the same values either way).
 */
function packForBackend(
  model: LoadedModel,
  format: WeightFormat | undefined,
  progress: (e: ProgressEvent) => void,
): DecoderWeights | PackedDecoderWeights {
  if (!format || format === 'f32') return model.weights;
  const total = model.weightBytes;
  progress({ phase: 'convert', fraction: 0, detail: `decoder weights to ${format}`, bytes: { loaded: 0, total } });
  const packed = packDecoderWeights(model.config, model.weights, format);
  progress({ phase: 'convert', fraction: 1, detail: `decoder weights to ${format}`, bytes: { loaded: total, total } });
  return packed;
}

/**
 * The progress callback the load reports through, with the load's signal checked around
 * each event: a cancel stops the download, convert and upload at their next event (each
 * frees what it made) and is a CancelledError naming the phase it came in.
 */
function cancellableProgress(signal: AbortSignal | undefined, user: ((e: ProgressEvent) => void) | undefined) {
  let phase: ProgressPhase = 'download';
  let abortedIn: ProgressPhase | undefined;
  signal?.addEventListener('abort', () => void (abortedIn ??= phase), { once: true });
  const stop = () => {
    if (signal?.aborted) throw new CancelledError('', abortedIn ?? phase);
  };
  return {
    stop,
    /** A cancel from deeper down (the backend's own check) said with the phase the caller saw it in. */
    said(e: unknown): unknown {
      return e instanceof CancelledError && abortedIn !== undefined && e.phase !== abortedIn
        ? new CancelledError(e.text, abortedIn)
        : e;
    },
    /** Forwards and checks: for events from code that frees its work when a callback throws. */
    progress(e: ProgressEvent) {
      phase = e.phase;
      stop();
      user?.(e);
      stop();
    },
    /** Forwards only: for events from inside a promise's callback (compilation), where a throw would go unheard. */
    tell(e: ProgressEvent) {
      phase = e.phase;
      user?.(e);
    },
  };
}

/** Loads the model, its audio route and a decoder backend. */
export async function loadTranscriber(options: LoadOptions): Promise<WnwTranscriber> {
  checkLoadOptions(options);
  const cancel = cancellableProgress(options.signal, options.onProgress);
  try {
    return await load(options, cancel);
  } catch (e) {
    throw cancel.said(e);
  }
}

async function load(options: LoadOptions, cancel: ReturnType<typeof cancellableProgress>): Promise<WnwTranscriber> {
  let policy = options.policy ?? 'wnw';
  const budget = options.budget ?? 0.2;
  if (!(typeof budget === 'number' && budget > 0 && budget <= 1))
    throw new WnwError('BAD_ARGUMENT', `budget must be in (0, 1], got ${show(budget)}`);
  const { progress, tell, stop } = cancel;
  stop();
  // The adapter first: its limits (and the memory the page reports) judge the model from its
  // config before a shard byte is read, rather than after gigabytes of them.
  let fallback: string | undefined;
  const target = await chooseBackend({ backend: options.backend, onFallback: (reason) => void (fallback = reason) });
  const device: FitDevice = {
    limits: target.kind === 'webgpu' ? target.limits : null,
    deviceMemoryGiB: reportedDeviceMemoryGiB(),
  };
  let decoderWeights = { format: options.weightFormat ?? 'f32', weightBytes: 0 };
  const model = await loadModel(
    options.model,
    (fraction, detail, bytes, phase = 'download') => progress({ phase, fraction, detail, ...(bytes ? { bytes } : {}) }),
    {
      language: options.language,
      audioEncoder: options.audioEncoder,
      weightFormat: options.weightFormat,
      ...(options.cache !== undefined ? { cache: options.cache } : {}),
      // The GPU takes a packed decoder streamed from its files: the page keeps no copy of it.
      stream: target.kind === 'webgpu',
      beforeWeights: async (config, format, tied, { packAtLoad }) => {
        decoderWeights = { format, weightBytes: decoderWeightBytes(config, format, tied).total };
        // A recording known at load (the CLI's) is held against the positions before a weight is read.
        if (options.audioSeconds !== undefined) refusePastPositions(config, options.model, options.audioSeconds);
        refuseUnfit(
          config,
          format,
          tied,
          device,
          `the decoder of ${config.name}${target.kind === 'webgpu' ? ` on ${target.label}` : ''}`,
          // The recording itself is judged where it is known and the GPU holds its KV pool.
          options.audioSeconds !== undefined && target.kind === 'webgpu'
            ? {
                audioTokens: audioTokensOf(config, options.audioSeconds),
                kvPrecision: options.kvPrecision ?? 'f32',
                budget: policyBudget(policy, budget),
              }
            : undefined,
        );
        // On the CPU, weights and KV are host memory: judged against what the host has.
        if (target.kind === 'cpu') {
          const available = await availableHostMemory(options.hostMemoryBytes);
          if (available)
            refuseHostUnfit(
              config,
              {
                weightFormat: format,
                tied,
                packAtLoad,
                ...(options.audioSeconds !== undefined
                  ? {
                      recording: {
                        audioTokens: audioTokensOf(config, options.audioSeconds),
                        kvPrecision: options.kvPrecision ?? 'f32',
                      },
                    }
                  : {}),
              },
              available,
              `the decoder of ${config.name} on the CPU`,
            );
        }
      },
    },
  );
  const language = languageCode(options.language);
  if (language !== undefined && !model.family) {
    throw new WnwError(
      'BAD_ARGUMENT',
      `the model in ${options.model} takes no language option (its prompt names no language); omit language`,
    );
  }
  if (needsHeads(policy) && !model.heads) {
    if (options.policy !== undefined) throw new WnwError('BAD_ARGUMENT', missingHeads(policy, options.model));
    // The default on a folder without its head triage (a fresh download): the full cache, said once.
    policy = 'full';
    tell({
      phase: 'compile',
      fraction: 1,
      detail: `no heads.json in ${options.model}: the full cache runs (WnW needs the head triage: npx wnw calibrate)`,
    });
  }
  const onFallback = (reason: string) => {
    fallback = reason;
    progress({ phase: 'compile', fraction: 1, detail: `WebGPU unavailable: ${reason}; using the CPU backend` });
  };
  if (fallback !== undefined) onFallback(fallback);
  // Packed weights go to the backend as they are (dequantising them would undo the packing).
  // A source is streamed again by the rebuild after a device loss; the CPU fallback reads it whole.
  const weights = model.source ?? model.packed ?? packForBackend(model, options.weightFormat, progress);
  const build = (on: BackendTarget | undefined, signal: AbortSignal | undefined) =>
    buildEngine(
      model,
      weights,
      options,
      on,
      signal,
      { progress, tell, onFallback },
      { ...decoderWeights, memoryBytes: sureMemoryBytes(device) },
    );
  const engine = await build(target, options.signal);
  // A new device after a loss comes from a new adapter (an adapter gives one device), without the load's signal.
  return new WnwTranscriber(
    model,
    engine,
    { policy, budget, language, onProgress: options.onProgress, backendReason: fallback },
    () => build(undefined, undefined),
  );
}

/**
 * The decoder backend on `target` (none: chosen again) and the audio route beside it. A
 * cancel or failure after the decoder is built frees it, so nothing of a half-built engine
 * stays on the GPU.
 */
async function buildEngine(
  model: LoadedModel,
  weights: DecoderWeights | PackedDecoderWeights | PackedWeightSource,
  options: LoadOptions,
  target: BackendTarget | undefined,
  signal: AbortSignal | undefined,
  report: {
    progress: (e: ProgressEvent) => void;
    tell: (e: ProgressEvent) => void;
    onFallback: (reason: string) => void;
  },
  decoderWeights: { format: WeightFormat; weightBytes: number; memoryBytes: number | undefined },
): Promise<Engine> {
  const { progress, tell } = report;
  const decoder = await createBackend(
    model.config,
    weights,
    {
      backend: options.backend,
      kvMaxBytes: options.kvMaxBytes,
      kvPrecision: options.kvPrecision,
      weightFormat: options.weightFormat,
      onCompile: (compiled, total) =>
        tell({
          phase: 'compile',
          fraction: total ? compiled / total : 1,
          detail: 'decoder kernels',
          pipelines: { compiled, total },
        }),
      onUpload: (loaded, total) =>
        progress({
          phase: 'upload',
          fraction: total ? loaded / total : 1,
          detail: 'decoder weights',
          bytes: { loaded, total },
        }),
      onFallback: report.onFallback,
      signal,
    },
    target,
  );
  let route: AudioRoute | undefined;
  try {
    progress({ phase: 'compile', fraction: 1, detail: decoder.label });
    // After the decoder: a Hugging Face audio tower runs on the WebGPU decoder's device.
    progress({ phase: 'compile', fraction: 0, detail: 'audio encoder' });
    route = await createAudioRoute(model, {
      file: `${options.model}/encoder.onnx`,
      gpu: gpuContextOf(decoder),
      // The encoder follows the decoder: a decoder on the CPU (asked for, or a software
      // adapter judged slower than it) leaves WebGPU to no part of the model.
      ...(decoder.kind === 'cpu' ? { onnxProviders: ['wasm' as const] } : {}),
      weightFormat: options.audioWeightFormat,
      decoder: decoderWeights,
    });
    progress({ phase: 'compile', fraction: 1, detail: route.label });
    return { decoder, route };
  } catch (e) {
    decoder.dispose();
    await route?.dispose();
    throw e;
  }
}
