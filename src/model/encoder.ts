/**
 * The audio encoder (encoder.onnx: `mel` [1, nMels, T] -> `embeddings` [1, T/framesPerToken,
 * hiddenSize]) run by onnxruntime-web: WebGPU in the browser when the adapter and ORT
 * agree, else wasm; wasm in Node. Long audio is cut into windows of
 * `audio.encoderWindowFrames` mel frames (the encoder attends within such windows in
 * training, so this changes nothing numerically and keeps cost and memory linear in length).
 */
import type * as Ort from 'onnxruntime-web';
import type { AudioConfig, ModelConfig } from './config.js';
import { CancelledError, ModelLoadError } from '../errors.js';
import { LogMel } from '../audio/mel.js';
import { isNode, readBytes } from './files.js';
import { nodeHost } from '../platform/host.js';

/** Runs one window: mel [nMels, frames] (mel-major) -> embeddings [frames / framesPerToken, hiddenSize]. */
export type EncoderRunFn = (mel: Float32Array, frames: number) => Promise<Float32Array>;

export interface EncodeOptions {
  /** Called after each window with the windows done and the total. */
  onProgress?: (done: number, total: number) => void;
  signal?: AbortSignal;
}

export interface EncoderWindow {
  /** First mel frame. */
  start: number;
  /** Mel frames in this window (a multiple of framesPerToken). */
  frames: number;
  /** First output row (audio token). */
  token: number;
}

/**
 * Consecutive windows of `windowFrames` frames; the last is shorter, trimmed down to a
 * multiple of framesPerToken (a tail under one token is dropped), so the windows yield
 * exactly floor(T / framesPerToken) audio tokens.
 */
export function encoderWindows(T: number, windowFrames: number, framesPerToken: number): EncoderWindow[] {
  if (windowFrames % framesPerToken !== 0 || windowFrames <= 0) {
    throw new RangeError(
      `encoder window (${windowFrames}) must be a positive multiple of framesPerToken (${framesPerToken})`,
    );
  }
  const out: EncoderWindow[] = [];
  for (let start = 0; start < T; start += windowFrames) {
    const raw = Math.min(windowFrames, T - start);
    const frames = raw - (raw % framesPerToken);
    if (frames > 0) out.push({ start, frames, token: start / framesPerToken });
  }
  return out;
}

/**
 * Runs the windows of a T-frame input one after another (never two `session.run` at
 * once; `signal` checked between windows) and concatenates the outputs into
 * [floor(T / framesPerToken), hiddenSize]. `melOf(start, frames)` supplies each
 * window's mel as [nMels, frames], so a caller can compute it per window.
 */
export async function encodeWindows(
  T: number,
  audio: Pick<AudioConfig, 'nMels' | 'framesPerToken' | 'encoderWindowFrames'>,
  hiddenSize: number,
  melOf: (start: number, frames: number) => Float32Array,
  run: EncoderRunFn,
  opts: EncodeOptions = {},
): Promise<Float32Array> {
  const { nMels, framesPerToken } = audio;
  const windows = encoderWindows(T, audio.encoderWindowFrames, framesPerToken);
  const out = new Float32Array(Math.floor(T / framesPerToken) * hiddenSize);
  let done = 0;
  for (const w of windows) {
    if (opts.signal?.aborted) throw new CancelledError();
    const input = melOf(w.start, w.frames);
    if (input.length !== nMels * w.frames)
      throw new RangeError(`window mel has ${input.length} values, expected ${nMels} x ${w.frames}`);
    const emb = await run(input, w.frames);
    const rows = w.frames / framesPerToken;
    if (emb.length !== rows * hiddenSize) {
      throw new ModelLoadError(
        'encoder.onnx',
        `window of ${w.frames} frames gave ${emb.length} values, expected ${rows} x ${hiddenSize}`,
        'embeddings',
      );
    }
    out.set(emb, w.token * hiddenSize);
    opts.onProgress?.(++done, windows.length);
  }
  if (opts.signal?.aborted) throw new CancelledError();
  return out;
}

/** `encodeWindows` over a whole mel [nMels, T] (mel-major): each window's columns are copied out. */
export function encodeWindowed(
  mel: Float32Array,
  T: number,
  audio: Pick<AudioConfig, 'nMels' | 'framesPerToken' | 'encoderWindowFrames'>,
  hiddenSize: number,
  run: EncoderRunFn,
  opts: EncodeOptions = {},
): Promise<Float32Array> {
  const { nMels } = audio;
  if (mel.length < nMels * T)
    return Promise.reject(new RangeError(`mel has ${mel.length} values, expected ${nMels} x ${T}`));
  const melOf = (start: number, frames: number): Float32Array => {
    if (start === 0 && frames === T) return mel.length === nMels * T ? mel : mel.subarray(0, nMels * T);
    const input = new Float32Array(nMels * frames);
    for (let m = 0; m < nMels; m++) input.set(mel.subarray(m * T + start, m * T + start + frames), m * frames);
    return input;
  };
  return encodeWindows(T, audio, hiddenSize, melOf, run, opts);
}

type OrtModule = typeof Ort;
export type ExecutionProvider = 'webgpu' | 'wasm';

/** onnxruntime-web, configured for this environment (once). */
export async function loadOrt(): Promise<OrtModule> {
  if (isNode()) return nodeHost('onnxruntime-web').ort();
  // The WebGPU build also contains the wasm backend used as fallback.
  return (await import('onnxruntime-web/webgpu')) as OrtModule;
}

export interface EncoderLoadOptions {
  /** Providers to try, in order; default: ['webgpu', 'wasm'] in a browser with navigator.gpu, ['wasm'] elsewhere. */
  executionProviders?: ExecutionProvider[];
  /** Name used in error messages (default "encoder.onnx"). */
  file?: string;
}

async function readModel(model: string | ArrayBuffer | Uint8Array): Promise<Uint8Array> {
  if (typeof model !== 'string') return model instanceof Uint8Array ? model : new Uint8Array(model);
  return new Uint8Array(await readBytes(model));
}

export class AudioEncoder {
  /** Serialises session.run: ORT sessions must not run concurrently. */
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;
  private logMel: LogMel | undefined;

  private constructor(
    private readonly ort: OrtModule,
    private readonly session: Ort.InferenceSession,
    readonly executionProvider: ExecutionProvider,
    readonly config: ModelConfig,
    private readonly file: string,
  ) {}

  /** Loads encoder.onnx (URL, Node path, or bytes) and checks its input/output names. */
  static async create(
    model: string | ArrayBuffer | Uint8Array,
    config: ModelConfig,
    opts: EncoderLoadOptions = {},
  ): Promise<AudioEncoder> {
    const file = opts.file ?? (typeof model === 'string' ? model : 'encoder.onnx');
    const bytes = await readModel(model);
    const ort = await loadOrt();
    const hasGpu = !isNode() && typeof navigator !== 'undefined' && 'gpu' in navigator;
    const providers = opts.executionProviders ?? (hasGpu ? ['webgpu', 'wasm'] : ['wasm']);
    let lastError: unknown;
    for (const ep of providers) {
      try {
        const session = await ort.InferenceSession.create(bytes, {
          executionProviders: [ep],
          graphOptimizationLevel: 'all',
        });
        const enc = new AudioEncoder(ort, session, ep, config, file);
        enc.checkSignature();
        return enc;
      } catch (e) {
        if (e instanceof ModelLoadError) throw e;
        lastError = e;
      }
    }
    throw new ModelLoadError(
      file,
      `onnxruntime-web could not load the encoder (${providers.join(', ')}): ${lastError instanceof Error ? lastError.message : String(lastError)}`,
    );
  }

  private checkSignature(): void {
    const { inputNames, outputNames } = this.session;
    if (!inputNames.includes('mel'))
      throw new ModelLoadError(this.file, `expected an input named "mel", found ${JSON.stringify(inputNames)}`, 'mel');
    if (!outputNames.includes('embeddings')) {
      throw new ModelLoadError(
        this.file,
        `expected an output named "embeddings", found ${JSON.stringify(outputNames)}`,
        'embeddings',
      );
    }
  }

  /** One window through the session: mel [nMels, frames] -> [frames / framesPerToken, hiddenSize]. */
  runWindow(mel: Float32Array, frames: number): Promise<Float32Array> {
    if (this.disposed) return Promise.reject(new Error('AudioEncoder used after dispose()'));
    const next = this.queue.then(() => this.runNow(mel, frames));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async runNow(mel: Float32Array, frames: number): Promise<Float32Array> {
    const { nMels, framesPerToken } = this.config.audio;
    const H = this.config.hiddenSize;
    const input = new this.ort.Tensor('float32', mel, [1, nMels, frames]);
    const result = await this.session.run({ mel: input });
    const out = result['embeddings'];
    const rows = frames / framesPerToken;
    const dims = out.dims;
    if (out.type !== 'float32' || dims.length !== 3 || dims[0] !== 1 || dims[1] !== rows || dims[2] !== H) {
      throw new ModelLoadError(
        this.file,
        `output "embeddings" is ${out.type} [${dims.join(', ')}], expected float32 [1, ${rows}, ${H}] for ${frames} mel frames`,
        'embeddings',
      );
    }
    // getData() copies off the GPU when ORT kept the output there; a CPU tensor is copied so
    // the caller owns the memory, then ORT's tensor is released.
    const data = new Float32Array((await out.getData()) as Float32Array);
    out.dispose();
    return data;
  }

  /**
   * Embeddings [floor(T / framesPerToken), hiddenSize] of mel [nMels, T] (normalised
   * log-mel, mel-major), window by window.
   */
  encode(mel: Float32Array, T: number, opts: EncodeOptions = {}): Promise<Float32Array> {
    return encodeWindowed(mel, T, this.config.audio, this.config.hiddenSize, (m, f) => this.runWindow(m, f), opts);
  }

  /**
   * Embeddings of 16 kHz mono samples, computing the log-mel one window at a time, so
   * memory beyond the output stays bounded by one window however long the audio.
   */
  encodeSamples(samples: Float32Array, opts: EncodeOptions = {}): Promise<Float32Array> {
    const lm = this.logMel ?? (this.logMel = new LogMel(this.config.audio));
    const T = lm.frames(samples.length);
    const melOf = (start: number, frames: number) => lm.compute(samples, { start, end: start + frames });
    return encodeWindows(T, this.config.audio, this.config.hiddenSize, melOf, (m, f) => this.runWindow(m, f), opts);
  }

  /**
   * The GPUDevice ORT created for its WebGPU provider (undefined on wasm). ORT does not
   * reliably adopt a device handed to it, so the decoder builds its buffers on this one.
   */
  async gpuDevice(): Promise<GPUDevice | undefined> {
    if (this.executionProvider !== 'webgpu') return undefined;
    return (await this.ort.env.webgpu.device) as GPUDevice | undefined;
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true; // refuse new windows, let queued ones finish
    await this.queue;
    await this.session.release();
  }
}
