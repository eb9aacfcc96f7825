/**
 * The transcriber: model + encoder + backend, loaded once; each `transcribe` call turns
 * audio into text under the chosen KV policy. Audio is decoded and featurised here,
 * the decode loop lives in run.ts.
 */
import { AudioError, CancelledError, WnwError } from './errors.js';
import { toMono16k } from './audio/decode.js';
import { logMel } from './audio/mel.js';
import { createBackend } from './backend/create.js';
import type { DecoderBackend } from './backend/types.js';
import { AudioEncoder } from './model/encoder.js';
import { loadModel, type LoadedModel } from './model/loader.js';
import { createPolicy, NEEDS_HEADS } from './policy/registry.js';
import { assignRoles, budgetKey, headsScore } from './policy/wnw/triage.js';
import { runTranscription } from './run.js';
import type { AudioInput, LoadOptions, PolicyName, ProgressEvent, TranscribeOptions, TranscriptionResult, Transcriber } from './types.js';

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

export class WnwTranscriber implements Transcriber {
  private busy: Promise<unknown> = Promise.resolve();
  private disposed = false;
  /** The last encoding, kept when the caller asked for reuse (evaluation: many policies, one clip). */
  private lastEncoding: { input: AudioInput; enc: Awaited<ReturnType<WnwTranscriber['encode']>> } | null = null;

  constructor(
    readonly model: LoadedModel,
    private readonly encoder: AudioEncoder,
    private readonly decoder: DecoderBackend,
    private readonly defaults: { policy: PolicyName; budget: number; onProgress?: (e: ProgressEvent) => void },
  ) {}

  get backend(): string {
    return this.decoder.label;
  }

  get backendKind(): 'cpu' | 'webgpu' {
    return this.decoder.kind;
  }

  /** Transcriptions run one at a time (the backend holds one session). */
  transcribe(input: AudioInput, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const run = this.busy.then(() => this.transcribeNow(input, options));
    this.busy = run.catch(() => undefined);
    return run;
  }

  /** Audio → embeddings, exposed for evaluation (one encoding, many policies). */
  async encode(input: AudioInput, options: Pick<TranscribeOptions, 'signal' | 'onProgress'> = {}) {
    const c = this.model.config;
    const samples = await toMono16k(input as never, c.audio.sampleRate);
    const seconds = samples.length / c.audio.sampleRate;
    const t0 = now();
    const mel = logMel(samples, c.audio);
    const audioLength = Math.floor(mel.frames / c.audio.framesPerToken);
    if (audioLength < 1) {
      throw new AudioError(`The audio is too short (${seconds.toFixed(3)} s): at least ${(c.audio.framesPerToken * c.audio.hopLength / c.audio.sampleRate).toFixed(2)} s is needed.`);
    }
    const progress = options.onProgress ?? this.defaults.onProgress;
    const embeddings = await this.encoder.encode(mel.data, mel.frames, {
      signal: options.signal,
      onProgress: (done: number, total: number) => progress?.({ phase: 'encode', fraction: done / total }),
    });
    return { embeddings, audioLength, audioSeconds: seconds, encodeMs: now() - t0 };
  }

  /** Runs the decoder on already-encoded audio (evaluation shares one encoding across policies). */
  async decodeEncoded(enc: Awaited<ReturnType<WnwTranscriber['encode']>>, options: TranscribeOptions = {}): Promise<TranscriptionResult> {
    const policyName = options.policy ?? this.defaults.policy;
    const budget = policyName === 'full' ? 1 : options.budget ?? this.defaults.budget;
    const heads = this.model.heads;
    if (NEEDS_HEADS.has(policyName) && !heads) {
      throw new WnwError('BAD_ARGUMENT', `policy "${policyName}" needs heads.json next to the model; run npm run calibrate first`);
    }
    const policy = createPolicy(policyName, { ...options.policyOptions, budget, heads });
    // A policy's own roles first (an ablation may have changed them), else the calibrated ones.
    const roles = policy.headRoles ?? (heads ? heads.roles[budgetKey(budget)] ?? assignRoles(headsScore(heads), Math.min(budget, 0.8)) : undefined);
    const progress = options.onProgress ?? this.defaults.onProgress ?? (() => {});
    return runTranscription({
      model: this.model,
      backend: this.decoder,
      policy,
      policyName,
      budget,
      embeddings: enc.embeddings,
      audioLength: enc.audioLength,
      audioSeconds: enc.audioSeconds,
      encodeMs: enc.encodeMs,
      timingHeads: roles ? [...roles.anchors] : [],
      tidalHeads: policy.headRoles?.tidal ?? [],
      options,
      progress,
    });
  }

  private async transcribeNow(input: AudioInput, options: TranscribeOptions): Promise<TranscriptionResult> {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', 'this transcriber was disposed; load a new one');
    if (options.signal?.aborted) throw new CancelledError();
    const reuse = options.reusePrefill && this.lastEncoding?.input === input ? this.lastEncoding.enc : null;
    const enc = reuse ?? (await this.encode(input, options));
    this.lastEncoding = options.reusePrefill ? { input, enc } : null;
    return this.decodeEncoded(enc, options);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.lastEncoding = null;
    this.decoder.dispose();
    void this.encoder.dispose();
  }
}

/** Loads the model, the audio encoder and a decoder backend. */
export async function loadTranscriber(options: LoadOptions): Promise<WnwTranscriber> {
  const policy = options.policy ?? 'wnw';
  const budget = options.budget ?? 0.2;
  if (!(budget > 0 && budget <= 1)) throw new WnwError('BAD_ARGUMENT', `budget must be in (0, 1], got ${budget}`);
  const progress = options.onProgress ?? (() => {});
  const model = await loadModel(options.model, (fraction, detail) => progress({ phase: 'download', fraction, detail }));
  if (NEEDS_HEADS.has(policy) && !model.heads) {
    throw new WnwError('BAD_ARGUMENT', `policy "${policy}" needs heads.json in ${options.model}; run npm run calibrate, or use policy "full"`);
  }
  progress({ phase: 'compile', fraction: 0, detail: 'audio encoder' });
  const encoder = await AudioEncoder.create(model.encoderBytes, model.config, { file: `${options.model}/encoder.onnx` });
  const decoder = await createBackend(model.config, model.weights, {
    backend: options.backend,
    kvBudgetBytes: options.kvBudgetBytes,
    kvPrecision: options.kvPrecision,
    onCompile: (fraction) => progress({ phase: 'compile', fraction, detail: 'decoder kernels' }),
    onFallback: (reason) => progress({ phase: 'compile', fraction: 1, detail: `WebGPU unavailable (${reason}); using the CPU backend` }),
  });
  progress({ phase: 'compile', fraction: 1, detail: decoder.label });
  return new WnwTranscriber(model, encoder, decoder, { policy, budget, onProgress: options.onProgress });
}
