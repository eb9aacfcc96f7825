/**
 * The page side of worker.ts: `loadTranscriberInWorker` returns an object with the same
 * `Transcriber` interface as `loadTranscriber`, whose work runs in a Web Worker.
 * AbortSignal, callbacks and typed errors behave as they do on the main thread; a cancel
 * also works while the engine is busy in a computation that never yields to the worker.
 */
import { CancelledError, DeviceLostError, WnwError, type WnwErrorCode } from '../errors.js';
import type {
  AudioInput,
  CalibrateOptions,
  Calibration,
  CalibrationClip,
  LoadOptions,
  PolicyName,
  Recording,
  RecordingOptions,
  RequestOptions,
  StepStats,
  TranscribeOptions,
  Transcriber,
  TranscriptionResult,
} from '../types.js';
import type { LiveOptions, LiveResult } from '../transcribe/live.js';
import type { LiveRecording } from '../types.js';
import { checkSubtitleFormat, isTranscriptionResult, subtitlesOf } from '../transcribe/subtitles.js';
import type {
  FromWorker,
  SerializedError,
  ToWorker,
  WorkerAudio,
  WorkerLoadOptions,
  WorkerProbe,
  WorkerRequest,
  WorkerTranscribeOptions,
} from './protocol.js';

/** Rebuilds a typed error: `code` and the extra fields survive; CancelledError and DeviceLostError keep their class (and text) for instanceof checks. */
export function deserializeError(s: SerializedError): Error {
  const field = (k: string) => (typeof s.fields?.[k] === 'string' ? (s.fields[k] as string) : undefined);
  if (s.code === 'CANCELLED') return new CancelledError(field('text'), field('phase'));
  if (s.code === 'DEVICE_LOST') return new DeviceLostError(field('reason') ?? s.message, field('text'));
  const e = s.code ? new WnwError(s.code as WnwErrorCode, s.message) : new Error(s.message);
  e.name = s.name;
  if (s.fields) Object.assign(e, s.fields);
  return e;
}

/** AudioBuffers cannot be posted: downmix here (the worker resamples). Anything else goes as is. */
function toWorkerAudio(input: AudioInput): WorkerAudio {
  if (input instanceof ArrayBuffer || input instanceof Uint8Array || input instanceof Float32Array) return input;
  if (typeof Blob !== 'undefined' && input instanceof Blob) return input;
  throw new WnwError(
    'BAD_ARGUMENT',
    'In a worker, pass a File/Blob, ArrayBuffer or a 16 kHz mono Float32Array; decode AudioBuffers on the page first.',
  );
}

/**
 * A probe's data (forcedTokens, reusePrefill) crosses to the worker; a hook would be called
 * on the worker's thread, where the page's function cannot go, so it is refused rather than
 * left uncalled.
 */
function workerProbe(probe: TranscribeOptions['probe']): WorkerProbe | undefined {
  // Not an object: the worker's option check names it.
  if (typeof probe !== 'object' || probe === null) return probe;
  const hooks = Object.entries(probe)
    .filter(([, v]) => typeof v === 'function')
    .map(([k]) => `probe.${k}`);
  if (hooks.length)
    throw new WnwError(
      'BAD_ARGUMENT',
      `${hooks.join(', ')} cannot run in a worker (a function cannot be posted to it); use the in-thread transcriber (loadTranscriber) for evaluation hooks`,
    );
  return probe;
}

export function defaultWorker(): Worker {
  return new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: 'wnw' });
}

/** How long a cancelled run may take to answer before its worker is stopped by force. */
export const CANCEL_GRACE_MS = 3000;

/** What a worker says once its model is loaded. */
type Loaded = Extract<FromWorker, { type: 'loaded' }>;

/** One worker with the model loaded in it. */
class WorkerHandle {
  private nextId = 1;
  private readonly handlers = new Map<number, (m: FromWorker) => void>();
  crashed: Error | null = null;
  readonly ready: Promise<Loaded>;

  constructor(
    readonly worker: Worker,
    options: WorkerLoadOptions,
    onProgress?: LoadOptions['onProgress'],
    signal?: AbortSignal,
  ) {
    worker.addEventListener('message', (e: MessageEvent<FromWorker>) => this.handlers.get(e.data.id)?.(e.data));
    // A worker that fails to start (bad URL, syntax error) only reports an ErrorEvent: fail every pending call with it.
    let started = false;
    worker.addEventListener('error', (e: ErrorEvent) => {
      this.crashed = new WnwError(
        'WORKER_FAILED',
        started
          ? `the transcription worker stopped (${e.message || 'an uncaught error'}); load the transcriber again`
          : `the transcription worker could not start (${e.message || 'its script did not load'}): wnw's worker.js, ` +
              'beside its other files, must be served with the page. Bundlers that follow ' +
              "new Worker(new URL('./worker.js', import.meta.url)) (Vite, webpack 5, esbuild with bundling) emit it; " +
              'otherwise pass loadTranscriberInWorker a second argument that makes the worker from where you serve it',
      );
      for (const h of this.handlers.values())
        h({
          type: 'failed',
          id: -1,
          error: { name: 'WnwError', code: 'WORKER_FAILED', message: this.crashed.message },
        });
    });
    this.ready = new Promise<Loaded>((resolve, reject) => {
      let kill: ReturnType<typeof setTimeout> | undefined;
      const finish = () => {
        this.close(id);
        clearTimeout(kill);
        signal?.removeEventListener('abort', onAbort);
      };
      const id = this.open((m) => {
        if (m.type === 'progress') onProgress?.(m.event);
        else if (m.type === 'loaded') ((started = true), finish(), resolve(m));
        else if (m.type === 'failed') (finish(), reject(deserializeError(m.error)));
      });
      // The worker stops the load at its next check; one that does not answer in time is stopped by force.
      const onAbort = () => {
        this.send({ type: 'cancel', id });
        kill = setTimeout(() => {
          finish();
          this.worker.terminate();
          reject(new CancelledError('', 'load'));
        }, CANCEL_GRACE_MS);
      };
      if (signal?.aborted) return (finish(), reject(new CancelledError('', 'download')));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.send({ type: 'load', id, options });
    });
    // A reload after a forced stop is awaited by the next transcribe; until then nobody listens.
    this.ready.catch(() => {});
  }

  open(handler: (m: FromWorker) => void): number {
    const id = this.nextId++;
    this.handlers.set(id, handler);
    return id;
  }

  close(id: number): void {
    this.handlers.delete(id);
  }

  send(m: ToWorker): void {
    this.worker.postMessage(m);
  }
}

/** What the page saw of a run, to hand back if the worker has to be stopped mid-run. */
interface Seen {
  text: string;
  tokens: number[];
  steps: StepStats[];
}

function partialResult(
  seen: Seen,
  input: AudioInput,
  policy: PolicyName,
  budget: number,
  backend: string,
): TranscriptionResult {
  const n = seen.steps.length;
  const mean = (f: (s: StepStats) => number) => (n ? seen.steps.reduce((a, s) => a + f(s), 0) / n : 0);
  const audioSeconds = input instanceof Float32Array ? input.length / 16000 : 0;
  return {
    text: seen.text,
    // The page sees the streamed transcript only, not the answer as the model wrote it.
    rawText: seen.text,
    words: [],
    tokens: seen.tokens,
    error: new CancelledError(seen.text),
    // Only what the page observed; the engine's own totals went down with the worker.
    stats: {
      policy,
      budget,
      backend,
      audioSeconds,
      audioTokens: 0,
      decodeSteps: seen.tokens.length,
      stoppedBy: 'cancelled',
      kv: {
        rGpu: mean((s) => s.rGpu),
        rGpuPeak: Math.max(0, ...seen.steps.map((s) => s.rGpu)),
        rGpuCpu: 0,
        gpuKvBytes: 0,
        cpuKvBytes: 0,
        textKvPages: seen.steps.at(-1)?.textKvPages ?? 0,
      },
      traffic: {
        mbPerStep: mean((s) => s.bytesToGpu) / 1e6,
        mbPerStepMax: Math.max(0, ...seen.steps.map((s) => s.bytesToGpu)) / 1e6,
        recallsPerStep: 0,
        releasesPerStep: 0,
      },
      timing: { msPerToken: mean((s) => s.msPerToken), prefillMs: 0, encodeMs: 0, realTimeFactor: 0 },
      prompt: { reusedPositions: 0, prefilledPositions: 0 },
    },
  };
}

/**
 * Like `loadTranscriber`, but the model lives in a Web Worker. A cancel that the engine does
 * not answer within CANCEL_GRACE_MS (it is inside a long computation that does not yield)
 * stops the worker and returns what was streamed so far; the next call starts a new worker
 * and loads the model again.
 */
export async function loadTranscriberInWorker(
  options: LoadOptions,
  makeWorker: () => Worker = defaultWorker,
): Promise<Transcriber> {
  // The load's signal cancels this first load only; a reload after a forced stop has none.
  const { onProgress, signal, ...rest } = options;
  let handle = new WorkerHandle(makeWorker(), rest, onProgress, signal);
  const { backend, backendReason, modelInfo } = await handle.ready.catch((e: unknown) => {
    handle.worker.terminate();
    throw e;
  });
  /** The model as loaded, and whether it has heads since a calibration. */
  let info = modelInfo;

  /**
   * Sends one run (`message` for the id it gets) and streams its tokens, steps and progress
   * back; a cancel the worker does not answer in time stops it and returns what was streamed.
   */
  async function call<T>(
    opts: TranscribeOptions,
    message: (
      id: number,
      options: WorkerTranscribeOptions,
      wants: { wantSteps: boolean; wantTokens: boolean },
    ) => ToWorker,
    input: () => AudioInput,
    answer: (m: FromWorker, done: (v: T) => void) => boolean,
    partial: (seen: Seen, input: AudioInput) => T,
  ): Promise<T> {
    const probe = workerProbe(opts.probe);
    if (handle.crashed) throw handle.crashed;
    const s = handle;
    await s.ready;
    const { signal, onToken, onStep, onProgress: onCallProgress, probe: _hooks, ...data } = opts;
    const callOptions: WorkerTranscribeOptions = { ...data, ...(probe ? { probe } : {}) };
    const seen: Seen = { text: '', tokens: [], steps: [] };
    return new Promise<T>((resolve, reject) => {
      let kill: ReturnType<typeof setTimeout> | undefined;
      const finish = () => {
        s.close(id);
        clearTimeout(kill);
        signal?.removeEventListener('abort', onAbort);
      };
      const id = s.open((m) => {
        if (m.type === 'progress') onCallProgress?.(m.event);
        else if (m.type === 'token') ((seen.text += m.text), seen.tokens.push(m.token), onToken?.(m.text, m.token));
        else if (m.type === 'step') (seen.steps.push(m.stats), onStep?.(m.stats));
        else if (m.type === 'failed') (finish(), reject(deserializeError(m.error)));
        else answer(m, (v) => (finish(), resolve(v)));
      });
      const onAbort = () => {
        s.send({ type: 'cancel', id });
        kill = setTimeout(() => {
          finish();
          s.worker.terminate();
          if (handle === s) handle = new WorkerHandle(makeWorker(), rest, onProgress);
          try {
            resolve(partial(seen, input()));
          } catch (e) {
            reject(e);
          }
        }, CANCEL_GRACE_MS);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // Tokens always come back, even without onToken: they are the partial transcript if the worker must be stopped.
      s.send(message(id, callOptions, { wantSteps: !!onStep, wantTokens: true }));
      if (signal?.aborted) onAbort();
    });
  }

  const result = (m: FromWorker, done: (r: TranscriptionResult) => void) =>
    m.type === 'result' && (done({ ...m.result, ...(m.error ? { error: deserializeError(m.error) } : {}) }), true);
  const partialOf = (opts: TranscribeOptions) => (seen: Seen, input: AudioInput) =>
    partialResult(seen, input, opts.policy ?? options.policy ?? 'wnw', opts.budget ?? options.budget ?? 0.2, backend);

  type Opened = { id: number; audioSeconds: number; can: Recording['can'] };
  /** Opens `input` in the current worker: the `open` message's id names the recording there. */
  const openIn = (input: AudioInput, opts: RecordingOptions): Promise<Opened> => {
    const { signal, onProgress: onOpenProgress, system } = opts;
    const audio = toWorkerAudio(input);
    return call<Opened>(
      { ...(signal ? { signal } : {}), ...(onOpenProgress ? { onProgress: onOpenProgress } : {}) },
      (id) => ({ type: 'open', id, audio, ...(system !== undefined ? { system } : {}) }),
      () => input,
      (m, done) => m.type === 'opened' && (done({ id: m.id, audioSeconds: m.audioSeconds, can: m.can }), true),
      () => {
        throw new CancelledError('', 'encode');
      },
    );
  };

  /**
   * A recording open in the worker. A worker stopped by force (a cancel it did not answer)
   * took the recording with it: the next request opens it again in the new one.
   */
  function recording(opened: Opened, input: AudioInput, system: RecordingOptions['system']): Recording {
    let at = { handle, id: opened.id };
    let closed = false;
    const current = async (): Promise<number> => {
      if (at.handle !== handle) {
        const again = await openIn(input, system !== undefined ? { system } : {});
        at = { handle, id: again.id };
      }
      return at.id;
    };
    const request = async <T = TranscriptionResult>(
      r: WorkerRequest,
      opts: RequestOptions,
      answer: (m: FromWorker, done: (v: T) => void) => boolean = result as never,
    ): Promise<T> => {
      if (closed) throw new WnwError('BAD_ARGUMENT', 'this recording was disposed; open the audio again');
      const recId = await current();
      return call<T>(
        opts,
        (id, o, wants) => ({ type: 'request', id, recording: recId, request: r, options: o, ...wants }),
        () => input,
        answer,
        partialOf(opts) as never,
      );
    };
    return {
      audioSeconds: opened.audioSeconds,
      can: opened.can,
      transcribe: (opts = {}) => request({ kind: 'transcribe' }, opts),
      translate: (targetLanguage, opts = {}) => request({ kind: 'translate', targetLanguage }, opts),
      ask: (question, { fresh, ...opts } = {}) =>
        request({ kind: 'ask', question, ...(fresh !== undefined ? { fresh } : {}) }, opts),
      subtitles: async (format, from = {}) => {
        // A result is cut here: its words are all the cues need.
        if (isTranscriptionResult(from)) {
          checkSubtitleFormat(format);
          return subtitlesOf(format, from);
        }
        return request<string>(
          { kind: 'subtitles', format },
          from,
          (m, done) => m.type === 'subtitles' && (done(m.text), true),
        );
      },
      dispose() {
        if (closed) return;
        closed = true;
        const closeId = at.handle.open(() => {});
        at.handle.close(closeId);
        at.handle.send({ type: 'close-recording', id: closeId, recording: at.id });
      },
    };
  }

  /**
   * A live recording in the current worker. Its audio is kept here too, as `open` keeps its
   * input: the recording it ends in opens again in a worker restarted after a forced stop.
   */
  function live(options: LiveOptions): LiveRecording {
    const { onText, probe, ...data } = options;
    if (probe)
      throw new WnwError('BAD_ARGUMENT', 'a live probe is a hook, called in its thread: use loadTranscriber for it');
    const s = handle;
    const chunks: Float32Array[] = [];
    let heard = 0;
    let stopped = false;
    const start = s.open((m) => m.type === 'live-text' && onText?.(m.text));
    try {
      s.send({ type: 'live-start', id: start, options: data });
    } catch (e) {
      // Options that cannot be posted (a function in them): refused now, as the in-thread `live` refuses bad options.
      s.close(start);
      throw e;
    }
    /** One message of this live recording and its answer. */
    const ask = <T>(message: (id: number) => ToWorker, answer: (m: FromWorker, done: (v: T) => void) => boolean) =>
      new Promise<T>((resolve, reject) => {
        if (s.crashed) return reject(s.crashed);
        if (s !== handle)
          return reject(
            new WnwError('BAD_ARGUMENT', 'this live recording was lost: its worker was stopped by force (a cancel)'),
          );
        const id = s.open((m) => {
          if (m.type === 'failed') (s.close(id), reject(deserializeError(m.error)));
          else answer(m, (v) => (s.close(id), resolve(v)));
        });
        s.send(message(id));
      });
    return {
      get audioSeconds() {
        return heard / 16000;
      },
      append(samples: Float32Array): Promise<void> {
        if (stopped) return Promise.reject(new WnwError('BAD_ARGUMENT', 'this live recording was stopped'));
        if (!(samples instanceof Float32Array))
          return Promise.reject(new WnwError('BAD_ARGUMENT', 'append takes a Float32Array of mono samples at 16 kHz'));
        // Posted as a copy (not transferred): this side keeps the chunk for the recording, and the caller keeps its array.
        const chunk = samples.slice();
        chunks.push(chunk);
        heard += chunk.length;
        return ask<void>(
          (id) => ({ type: 'live-append', id, live: start, samples: chunk }),
          (m, done) => m.type === 'live-appended' && (done(), true),
        );
      },
      async stop(): Promise<LiveResult> {
        if (stopped) throw new WnwError('BAD_ARGUMENT', 'this live recording was stopped already');
        stopped = true;
        try {
          const m = await ask<Extract<FromWorker, { type: 'live-stopped' }>>(
            (id) => ({ type: 'live-stop', id, live: start }),
            (m, done) => m.type === 'live-stopped' && (done(m), true),
          );
          const audio = new Float32Array(heard);
          chunks.reduce((at, c) => (audio.set(c, at), at + c.length), 0);
          chunks.length = 0;
          return {
            ...m.result,
            ...(m.recordingError ? { recordingError: deserializeError(m.recordingError) } : {}),
            recording: m.opened ? recording({ id: m.id, ...m.opened }, audio, undefined) : null,
          };
        } finally {
          // The last tick's text came before the answer: nothing more is said under the start's id.
          s.close(start);
        }
      },
    };
  }

  /** The triage in the worker, clip by clip between its other requests; a cancel stops it between clips. */
  async function calibrate(clips: CalibrationClip[], opts: CalibrateOptions = {}): Promise<Calibration> {
    if (handle.crashed) throw handle.crashed;
    const s = handle;
    await s.ready;
    // A URL is the page's: the worker's own address would resolve a relative one elsewhere.
    const here = typeof location !== 'undefined' ? location.href : undefined;
    const wire = Array.isArray(clips)
      ? clips.map((c) => (typeof c?.audio === 'string' && here ? { ...c, audio: new URL(c.audio, here).href } : c))
      : clips;
    const { signal, onProgress: onCalibrateProgress } = opts;
    return new Promise<Calibration>((resolve, reject) => {
      const finish = () => {
        s.close(id);
        signal?.removeEventListener('abort', onAbort);
      };
      const id = s.open((m) => {
        if (m.type === 'calibrate-progress') onCalibrateProgress?.(m.progress);
        else if (m.type === 'failed') (finish(), reject(deserializeError(m.error)));
        else if (m.type === 'calibrated') {
          finish();
          info = { ...info, heads: true };
          resolve(m.calibration);
        }
      });
      const onAbort = () => s.send({ type: 'cancel', id });
      signal?.addEventListener('abort', onAbort, { once: true });
      s.send({ type: 'calibrate', id, clips: wire });
      if (signal?.aborted) onAbort();
    });
  }

  function dispose() {
    const s = handle;
    // Terminate once the worker has freed its GPU buffers, or after a grace period if it hangs.
    const kill = setTimeout(() => s.worker.terminate(), 5000);
    const id = s.open(() => (clearTimeout(kill), s.worker.terminate()));
    s.send({ type: 'dispose', id });
  }

  return {
    backend,
    backendReason,
    get modelInfo() {
      return info;
    },
    live: (options: LiveOptions = {}) => live(options),
    calibrate,
    transcribe: (input: AudioInput, opts: TranscribeOptions = {}): Promise<TranscriptionResult> =>
      call(
        opts,
        (id, o, wants) => ({ type: 'transcribe', id, audio: toWorkerAudio(input), options: o, ...wants }),
        () => input,
        result,
        partialOf(opts),
      ),
    async open(input: AudioInput, opts: RecordingOptions = {}): Promise<Recording> {
      return recording(await openIn(input, opts), input, opts.system);
    },
    dispose,
    async [Symbol.asyncDispose]() {
      dispose();
    },
  };
}
