/**
 * Runs a Transcriber inside a dedicated Web Worker, so decoding (and above all the CPU
 * backend, which computes on the calling thread) never freezes the page. The page side
 * is `loadTranscriberInWorker` in client.ts; the messages are in protocol.ts.
 * One transcriber per worker; transcriptions run one at a time, in arrival order.
 */
import { loadTranscriber, type WnwTranscriber } from '../transcribe/transcriber.js';
import type { WnwLiveRecording } from '../transcribe/live.js';
import { WnwError } from '../errors.js';
import type { ProgressEvent, Recording, TranscribeOptions, TranscriptionResult } from '../types.js';
import { serializeError, type FromWorker, type ToWorker } from './protocol.js';

interface Scope {
  postMessage(message: FromWorker, transfer?: Transferable[]): void;
  addEventListener(type: 'message', listener: (e: MessageEvent<ToWorker>) => void): void;
}
const scope = self as unknown as Scope;

let transcriber: Promise<WnwTranscriber> | null = null;
const running = new Map<number, AbortController>();
let queue: Promise<unknown> = Promise.resolve();

const post = (m: FromWorker, transfer: Transferable[] = []) => scope.postMessage(m, transfer);

/** The recordings open in this worker, by the id of the message that opened them. */
const recordings = new Map<number, Recording>();

function recordingOf(id: number): Recording {
  const rec = recordings.get(id);
  if (!rec)
    throw new WnwError(
      'BAD_ARGUMENT',
      'this recording was disposed (its transcriber opened another); open the audio again',
    );
  return rec;
}

/**
 * The live recordings not stopped yet, by the id of their `live-start`. A start that failed
 * is kept as its rejection: the appends and the stop that name it answer with its error.
 */
const lives = new Map<number, Promise<WnwLiveRecording>>();

function liveOf(id: number): Promise<WnwLiveRecording> {
  return lives.get(id) ?? Promise.reject(new WnwError('BAD_ARGUMENT', 'this live recording was stopped'));
}

/** Answers `id` with what `job` posts, or with its failure. */
function answer(id: number, job: () => Promise<void>): void {
  job().catch((e: unknown) => post({ type: 'failed', id, error: serializeError(e) }));
}

function request(m: Extract<ToWorker, { type: 'request' }>, options: TranscribeOptions): Promise<TranscriptionResult> {
  const rec = recordingOf(m.recording);
  const r = m.request;
  if (r.kind === 'translate') return rec.translate(r.targetLanguage, options);
  if (r.kind === 'ask')
    return rec.ask(r.question, { ...options, ...(r.fresh !== undefined ? { fresh: r.fresh } : {}) });
  return rec.transcribe(options);
}

/**
 * Runs `job` after the runs queued before it, with an abort a cancel message reaches; its
 * failure answers as `failed`. Aborting a queued run must still answer, so the abort is
 * checked by the transcriber itself.
 */
function queued(id: number, job: (t: WnwTranscriber, signal: AbortSignal) => Promise<void>): void {
  const abort = new AbortController();
  running.set(id, abort);
  const run = async () => {
    try {
      if (!transcriber) throw new Error('load the model first');
      await job(await transcriber, abort.signal);
    } catch (e) {
      post({ type: 'failed', id, error: serializeError(e) });
    } finally {
      running.delete(id);
    }
  };
  queue = queue.then(run, run);
}

async function handle(m: ToWorker): Promise<void> {
  switch (m.type) {
    case 'load': {
      transcriber?.then(
        (t) => t.dispose(),
        () => {},
      );
      // A cancel message with the load's id aborts the load (the page's signal cannot be posted).
      const abort = new AbortController();
      running.set(m.id, abort);
      const loading = loadTranscriber({
        ...m.options,
        signal: abort.signal,
        onProgress: (event: ProgressEvent) => post({ type: 'progress', id: m.id, event }),
      });
      transcriber = loading;
      try {
        const asr = await loading;
        post({
          type: 'loaded',
          id: m.id,
          backend: asr.backend,
          backendReason: asr.backendReason,
          modelInfo: asr.modelInfo,
        });
      } catch (e) {
        transcriber = null;
        post({ type: 'failed', id: m.id, error: serializeError(e) });
      } finally {
        running.delete(m.id);
      }
      return;
    }
    case 'transcribe':
    case 'request':
      queued(m.id, async (t, signal) => {
        const options: TranscribeOptions = {
          ...m.options,
          signal,
          onProgress: (event) => post({ type: 'progress', id: m.id, event }),
          onToken: m.wantTokens ? (text, token) => post({ type: 'token', id: m.id, text, token }) : undefined,
          // Steps carry small typed arrays: structured-clone copies are cheap enough.
          onStep: m.wantSteps ? (stats) => post({ type: 'step', id: m.id, stats }) : undefined,
        };
        if (m.type === 'request' && m.request.kind === 'subtitles') {
          const text = await recordingOf(m.recording).subtitles(m.request.format, options);
          post({ type: 'subtitles', id: m.id, text });
          return;
        }
        const r = m.type === 'transcribe' ? await t.transcribe(m.audio, options) : await request(m, options);
        const { error, ...result } = r;
        post({ type: 'result', id: m.id, result, ...(error ? { error: serializeError(error) } : {}) });
      });
      return;
    case 'open':
      queued(m.id, async (t, signal) => {
        const rec = await t.open(m.audio, {
          signal,
          onProgress: (event) => post({ type: 'progress', id: m.id, event }),
          ...(m.system !== undefined ? { system: m.system } : {}),
        });
        // The transcriber keeps one recording: opening this one disposed the one before.
        recordings.clear();
        recordings.set(m.id, rec);
        post({ type: 'opened', id: m.id, audioSeconds: rec.audioSeconds, can: rec.can });
      });
      return;
    // Not queued behind the worker's runs: the transcriber runs a live recording's ticks in
    // turn with its other calls, and an append must not wait for a request to answer.
    case 'live-start': {
      const t = transcriber;
      const live = (async () => {
        if (!t) throw new Error('load the model first');
        return (await t).live({ ...m.options, onText: (text) => post({ type: 'live-text', id: m.id, text }) });
      })();
      // Its failure is each append's and the stop's answer.
      live.catch(() => {});
      lives.set(m.id, live);
      return;
    }
    case 'live-append':
      // Appends take their live recording in the order they came: the promise's callbacks run in that order.
      answer(m.id, async () => {
        await (await liveOf(m.live)).append(m.samples);
        post({ type: 'live-appended', id: m.id });
      });
      return;
    case 'live-stop':
      answer(m.id, async () => {
        const live = liveOf(m.live);
        lives.delete(m.live);
        const { recording, recordingError, ...result } = await (await live).stop();
        // The transcriber keeps one recording: opening this one disposed the one before.
        recordings.clear();
        if (recording) recordings.set(m.id, recording);
        post({
          type: 'live-stopped',
          id: m.id,
          result,
          opened: recording ? { audioSeconds: recording.audioSeconds, can: recording.can } : null,
          ...(recordingError ? { recordingError: serializeError(recordingError) } : {}),
        });
      });
      return;
    case 'close-recording':
      recordings.get(m.recording)?.dispose();
      recordings.delete(m.recording);
      return;
    case 'calibrate': {
      // Not queued as a whole: each clip joins the transcriber's queue, so requests sent meanwhile run between clips.
      const abort = new AbortController();
      running.set(m.id, abort);
      answer(m.id, async () => {
        try {
          if (!transcriber) throw new Error('load the model first');
          const calibration = await (
            await transcriber
          ).calibrate(m.clips, {
            signal: abort.signal,
            onProgress: (progress) => post({ type: 'calibrate-progress', id: m.id, progress }),
          });
          post({ type: 'calibrated', id: m.id, calibration });
        } finally {
          running.delete(m.id);
        }
      });
      return;
    }
    case 'cancel':
      running.get(m.id)?.abort();
      return;
    case 'dispose':
      for (const a of running.values()) a.abort();
      lives.clear();
      await queue;
      (await transcriber?.catch(() => null))?.dispose();
      transcriber = null;
      post({ type: 'disposed', id: m.id });
      return;
  }
}

scope.addEventListener('message', (e) => void handle(e.data));
