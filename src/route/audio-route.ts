/**
 * The audio route of a loaded model: 16 kHz samples → the decoder's `[N, hidden]` audio
 * embeddings. Which route runs is read from the model (`LoadedModel.encoder`), never from
 * a family name in the transcriber:
 * - 'onnx' (our own folders): the 80-bin natural-log mel of src/audio/mel.ts and the ONNX
 *   graph run by onnxruntime-web (src/model/encoder.ts); in a Hugging Face folder that holds
 *   an onnx-community audio encoder, the family's Whisper log-mel through that graph
 *   (src/route/whisper-onnx.ts);
 * - 'hf-audio-tower' (Hugging Face folders): the Whisper log-mel of
 *   src/audio/whisper-mel.ts, cut into processor examples by the family record's
 *   `processor` rule, then the checkpoint's audio tower and projector (src/encoder) as the
 *   record's `encoder` spec describes them.
 *
 * The Whisper encoder runs where the decoder runs: on the WebGPU decoder's device (its
 * weights uploaded for each recording and released before the decoder's prefill needs the
 * memory), or on the CPU reference next to the CPU decoder.
 */
import { AudioError, CancelledError, ModelLoadError } from '../errors.js';
import { logMel } from '../audio/mel.js';
import { WhisperLogMel, WHISPER_MEL } from '../audio/whisper-mel.js';
import {
  asStored,
  lookupFromCheckpoint,
  parseWhisperEncoderConfig,
  WhisperEncoder,
  type EncoderOutput,
  type MelInput,
  type TensorLookup,
  type WhisperEncoderConfig,
} from '../encoder/index.js';
import { defaultTowerFormat, towerBytes } from '../encoder/sizing.js';
import type { GpuContext } from '../gpu/device.js';
import type { PipelineCache } from '../gpu/pipelines.js';
import { AudioEncoder, type ExecutionProvider } from '../model/encoder.js';
import { WhisperOnnxRoute } from './whisper-onnx.js';
import type { WeightFormat } from '../model/quant.js';
import { exists, joinModelPath, readJson } from '../model/files.js';
import type { HfFamily } from '../model/families/types.js';
import { HfCheckpoint } from '../model/hf/checkpoint.js';
import type { LoadedModel } from '../model/loader.js';
import type { AudioRoute, RouteOptions, RouteOutput } from './types.js';

export interface RouteLoadOptions {
  /** Names encoder.onnx in errors (our own folders). */
  file?: string;
  /** The WebGPU decoder's device: a Hugging Face audio tower runs there. */
  gpu?: GpuContext;
  /**
   * How a Hugging Face audio tower's Linear weights are stored (f32, f16, q4); the CPU
   * encoder computes with the same rounded values, so both agree. Default:
   * `defaultTowerFormat` of the decoder beside it.
   */
  weightFormat?: WeightFormat;
  /**
   * Where an ONNX encoder runs, in order of preference; default: WebGPU first wherever a page
   * has it. A transcriber passes its decoder's choice: a decoder on the CPU (asked for, or an
   * adapter judged too slow) means the encoder runs on wasm too.
   */
  onnxProviders?: ExecutionProvider[];
  /** The decoder the tower runs beside: its weight format and bytes, and the memory the device surely has (for the default format). */
  decoder?: { format: WeightFormat; weightBytes: number; memoryBytes?: number };
}

/** The feature extractor's n_samples when preprocessor_config.json does not say: 30 s. */
const DEFAULT_N_SAMPLES = 480_000;

/** The route `model` says it needs. */
export async function createAudioRoute(model: LoadedModel, opts: RouteLoadOptions = {}): Promise<AudioRoute> {
  const src = model.encoder;
  if (src?.kind === 'hf-audio-tower') {
    if (!model.family)
      throw new ModelLoadError(
        joinModelPath(src.base, 'config.json'),
        "a Hugging Face audio tower needs the folder's model family, which this model lacks",
      );
    return WhisperRoute.load(model, model.family, src.base, opts);
  }
  if (src?.kind === 'onnx' && 'layout' in src) return WhisperOnnxRoute.load(model, src, opts.onnxProviders);
  const bytes = src?.kind === 'onnx' ? src.bytes : model.encoderBytes;
  const file = src?.kind === 'onnx' ? src.file : (opts.file ?? `${model.base}/encoder.onnx`);
  return new OnnxRoute(
    model,
    await AudioEncoder.create(bytes, model.config, {
      file,
      ...(opts.onnxProviders ? { executionProviders: opts.onnxProviders } : {}),
    }),
  );
}

class OnnxRoute implements AudioRoute {
  readonly kind = 'onnx' as const;
  readonly weightBytes: number;

  constructor(
    private readonly model: LoadedModel,
    readonly encoder: AudioEncoder,
  ) {
    this.weightBytes = model.encoder?.kind === 'onnx' ? model.encoder.bytes.byteLength : 0;
  }

  get label(): string {
    return `ONNX audio encoder (onnxruntime-web, ${this.encoder.executionProvider})`;
  }

  async encode(samples: Float32Array, opts: RouteOptions = {}): Promise<RouteOutput> {
    const a = this.model.config.audio;
    const mel = logMel(samples, a);
    const audioLength = Math.floor(mel.frames / a.framesPerToken);
    if (audioLength < 1) throw tooShort(samples.length, (a.framesPerToken * a.hopLength) / a.sampleRate, a.sampleRate);
    const embeddings = await this.encoder.encode(mel.data, mel.frames, opts);
    return { embeddings, audioLength };
  }

  dispose(): Promise<void> {
    return this.encoder.dispose();
  }
}

class WhisperRoute implements AudioRoute {
  readonly kind = 'whisper' as const;
  private readonly fe: WhisperLogMel;
  /** Set while the audio tower runs on WebGPU; cleared (with a note) if it cannot. */
  private gpu: { ctx: GpuContext; cache?: PipelineCache } | undefined;

  private constructor(
    private readonly model: LoadedModel,
    private readonly family: HfFamily,
    readonly encoder: WhisperEncoder,
    private readonly tensors: TensorLookup,
    private readonly config: WhisperEncoderConfig,
    private readonly nSamples: number,
    readonly weightBytes: number,
    gpu: GpuContext | undefined,
    private readonly weightFormat: WeightFormat,
    /** Why the format is not the default's first choice, where it is not. */
    private readonly formatNote?: string,
  ) {
    this.fe = new WhisperLogMel({ ...WHISPER_MEL, nMels: encoder.config.nMels });
    this.gpu = gpu ? { ctx: gpu } : undefined;
  }

  get label(): string {
    return (
      `${this.family.modelType} Whisper encoder ` +
      `(${this.gpu ? 'WebGPU' : 'CPU'}, ${this.weightFormat} weights${this.formatNote ? `: ${this.formatNote}` : ''})`
    );
  }

  static async load(model: LoadedModel, family: HfFamily, base: string, opts: RouteLoadOptions): Promise<WhisperRoute> {
    const configFile = joinModelPath(base, 'config.json');
    const spec = family.encoder;
    const json = (await readJson(configFile)) as Record<string, unknown>;
    const config = parseWhisperEncoderConfig(family.audioConfig(json), configFile, spec);
    const gpu = opts.gpu;
    const tower = (f: WeightFormat) => {
      const t = towerBytes(config, spec, model.config.hiddenSize, f, gpu?.limits.maxStorageBufferBindingSize);
      return (opts.decoder?.weightBytes ?? 0) + t.weightBytes + t.batchBytes;
    };
    // The device's memory matters only where the tower runs on it.
    const chosen = opts.weightFormat
      ? { format: opts.weightFormat }
      : defaultTowerFormat(opts.decoder?.format ?? 'f32', tower, gpu ? opts.decoder?.memoryBytes : undefined);
    const weightFormat = chosen.format;
    const ckpt = await HfCheckpoint.open(base);
    let encoder: WhisperEncoder;
    let tensors: TensorLookup;
    let weightBytes = 0;
    try {
      tensors = await lookupFromCheckpoint(ckpt, spec);
      encoder = new WhisperEncoder(
        config,
        spec,
        weightFormat === 'f32' ? tensors : asStored(tensors, config, spec, weightFormat),
      );
      for (const [name, t] of ckpt.tensors) {
        if (tensors.get(name)) weightBytes += 4 * t.shape.reduce((a, b) => a * b, 1);
      }
    } finally {
      await ckpt.close();
    }
    if (encoder.outputWidth !== model.config.hiddenSize) {
      throw new ModelLoadError(
        configFile,
        `the audio projector outputs ${encoder.outputWidth} values per token, ` +
          `the decoder's hidden size is ${model.config.hiddenSize}: config.json does not match the weights`,
      );
    }
    return new WhisperRoute(
      model,
      family,
      encoder,
      tensors,
      config,
      await extractorSamples(base),
      weightBytes,
      gpu,
      weightFormat,
      chosen.why,
    );
  }

  /**
   * The WebGPU encoder for one recording (weights uploaded now, released by the caller
   * once the recording is encoded), or undefined on the CPU. A device that cannot hold it
   * moves the route to the CPU for good, said once through `onProgress`.
   */
  private async gpuEncoder(
    opts: RouteOptions,
    total: number,
  ): Promise<{ encode(m: MelInput): Promise<EncoderOutput>; destroy(): void } | undefined> {
    if (!this.gpu) return undefined;
    try {
      const { PipelineCache } = await import('../gpu/pipelines.js');
      const { WebGpuWhisperEncoder } = await import('../encoder/webgpu.js');
      this.gpu.cache ??= new PipelineCache(this.gpu.ctx);
      return await WebGpuWhisperEncoder.create(
        this.gpu.ctx,
        this.gpu.cache,
        this.config,
        this.family.encoder,
        this.tensors,
        { weightFormat: this.weightFormat },
      );
    } catch (e) {
      this.gpu = undefined;
      opts.onProgress?.(
        0,
        total,
        `the audio encoder does not fit WebGPU here (${e instanceof Error ? e.message : String(e)}); encoding on the CPU`,
      );
      return undefined;
    }
  }

  async encode(samples: Float32Array, opts: RouteOptions = {}): Promise<RouteOutput> {
    const examples = this.family.processor(samples, this.nSamples);
    const parts: Float32Array[] = [];
    let rows = 0;
    const gpu = await this.gpuEncoder(opts, examples.length);
    try {
      for (let i = 0; i < examples.length; i++) {
        if (opts.signal?.aborted) throw new CancelledError();
        const { x, pad } = examples[i];
        const mel = this.fe.compute(x, pad);
        if (this.encoder.tokenCount(mel.frames, mel.validFrames) < 1) continue;
        const out = gpu ? await gpu.encode(mel) : this.encoder.encode(mel);
        parts.push(out.data);
        rows += out.tokens;
        opts.onProgress?.(i + 1, examples.length);
        // CPU encoding is synchronous per example: let a UI thread breathe between examples.
        if (!gpu) await new Promise<void>((r) => setTimeout(r, 0));
      }
    } finally {
      // The encoder's GPU weights go before the decoder's prefill needs the memory.
      gpu?.destroy();
    }
    if (opts.signal?.aborted) throw new CancelledError();
    const a = this.model.config.audio;
    if (rows < 1) throw tooShort(samples.length, (a.framesPerToken * a.hopLength) / a.sampleRate, a.sampleRate);
    const embeddings = new Float32Array(rows * this.model.config.hiddenSize);
    let o = 0;
    for (const p of parts) {
      embeddings.set(p, o);
      o += p.length;
    }
    return { embeddings, audioLength: rows };
  }

  dispose(): void {}
}

/** The feature extractor's n_samples (preprocessor_config.json), else 30 s. */
async function extractorSamples(base: string): Promise<number> {
  const file = joinModelPath(base, 'preprocessor_config.json');
  if (!(await exists(file))) return DEFAULT_N_SAMPLES;
  const j = (await readJson(file)) as Record<string, unknown>;
  const n = j['n_samples'];
  if (n === undefined) return DEFAULT_N_SAMPLES;
  if (typeof n !== 'number' || !Number.isInteger(n) || n <= 0)
    throw new ModelLoadError(file, `n_samples must be a positive integer, got ${JSON.stringify(n)}`);
  return n;
}

function tooShort(samples: number, minSeconds: number, rate: number): AudioError {
  return new AudioError(
    `The audio is too short (${(samples / rate).toFixed(3)} s): at least ${minSeconds.toFixed(2)} s is needed.`,
  );
}
