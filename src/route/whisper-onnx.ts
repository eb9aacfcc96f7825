/**
 * The ONNX route of a Hugging Face folder (src/model/hf/onnx-audio.ts): the family's Whisper
 * log-mel through the folder's ONNX audio encoder run by onnxruntime-web, laid out as the
 * family record's `onnx` says: the whole recording zero-padded to a multiple of the chunk,
 * one log-mel (one max) over it, cut into input chunks [1, mels, chunkFrames]; each chunk
 * gives rowsPerChunk rows of the output ([1, rows, hidden] or flat [rows, hidden]: exports
 * differ). Chunks run one at a time, so memory stays one chunk's whatever the length.
 */
import type * as Ort from 'onnxruntime-web';
import { AudioError, CancelledError, ModelLoadError } from '../errors.js';
import { WhisperLogMel, WHISPER_MEL } from '../audio/whisper-mel.js';
import { loadOrt, type ExecutionProvider } from '../model/encoder.js';
import { isNode } from '../model/files.js';
import type { HfOnnxEncoder } from '../model/hf/onnx-audio.js';
import type { LoadedModel } from '../model/loader.js';
import type { AudioRoute, RouteOptions, RouteOutput } from './types.js';

export class WhisperOnnxRoute implements AudioRoute {
  readonly kind = 'onnx' as const;
  readonly weightBytes: number;
  private readonly fe: WhisperLogMel;
  /** Serialises session.run: ORT sessions must not run concurrently. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly ort: typeof Ort,
    private readonly session: Ort.InferenceSession,
    private readonly src: HfOnnxEncoder,
    private readonly hidden: number,
    readonly executionProvider: ExecutionProvider,
  ) {
    this.weightBytes = src.bytes.byteLength + (src.externalData?.data.byteLength ?? 0);
    this.fe = new WhisperLogMel({ ...WHISPER_MEL, nMels: src.layout.nMels });
  }

  get label(): string {
    return `${this.src.modelType} ONNX audio encoder (onnxruntime-web, ${this.executionProvider}; ${this.src.file.split('/').pop()})`;
  }

  static async load(
    model: LoadedModel,
    src: HfOnnxEncoder,
    providers?: ExecutionProvider[],
  ): Promise<WhisperOnnxRoute> {
    const ort = await loadOrt();
    const hasGpu = !isNode() && typeof navigator !== 'undefined' && 'gpu' in navigator;
    const eps = providers ?? (hasGpu ? ['webgpu', 'wasm'] : ['wasm']);
    let lastError: unknown;
    for (const ep of eps) {
      let session: Ort.InferenceSession;
      try {
        session = await ort.InferenceSession.create(src.bytes, {
          executionProviders: [ep],
          graphOptimizationLevel: 'all',
          ...(src.externalData ? { externalData: [src.externalData] } : {}),
        });
      } catch (e) {
        lastError = e;
        continue;
      }
      try {
        checkSignature(session, src, model.config.hiddenSize);
      } catch (e) {
        await session.release();
        throw e;
      }
      return new WhisperOnnxRoute(ort, session, src, model.config.hiddenSize, ep);
    }
    throw new ModelLoadError(
      src.file,
      `onnxruntime-web could not load the audio encoder (${eps.join(', ')}): ${lastError instanceof Error ? lastError.message : String(lastError)}`,
    );
  }

  async encode(samples: Float32Array, opts: RouteOptions = {}): Promise<RouteOutput> {
    if (samples.length === 0) throw new AudioError('The audio is empty: at least one sample is needed.');
    const { chunkSamples, chunkFrames: F, rowsPerChunk: R, nMels } = this.src.layout;
    const mel = this.fe.compute(samples, { padToMultipleOf: chunkSamples });
    const chunks = mel.frames / F;
    if (!Number.isInteger(chunks)) throw new Error(`a log-mel of ${mel.frames} frames is not whole ${F}-frame chunks`);
    const H = this.hidden;
    const out = new Float32Array(chunks * R * H);
    for (let c = 0; c < chunks; c++) {
      if (opts.signal?.aborted) throw new CancelledError();
      // Input chunk c = the log-mel's columns [F·c, F·(c+1)), mel-major.
      const x = new Float32Array(nMels * F);
      for (let m = 0; m < nMels; m++)
        x.set(mel.data.subarray(m * mel.frames + c * F, m * mel.frames + (c + 1) * F), m * F);
      out.set(await this.run(x), c * R * H);
      opts.onProgress?.(c + 1, chunks);
    }
    if (opts.signal?.aborted) throw new CancelledError();
    return { embeddings: out, audioLength: chunks * R };
  }

  private run(x: Float32Array): Promise<Float32Array> {
    const next = this.queue.then(async () => {
      const { input, output, file, layout } = this.src;
      const R = layout.rowsPerChunk;
      const result = await this.session.run({
        [input]: new this.ort.Tensor('float32', x, [1, layout.nMels, layout.chunkFrames]),
      });
      const y = result[output];
      const d = y.dims;
      const H = this.hidden;
      const ok =
        y.type === 'float32' &&
        ((d.length === 3 && d[0] === 1 && d[1] === R && d[2] === H) || (d.length === 2 && d[0] === R && d[1] === H));
      if (!ok) {
        throw new ModelLoadError(
          file,
          `output "${output}" is ${y.type} [${d.join(', ')}] for one ${layout.chunkSamples / WHISPER_MEL.sampleRate} s chunk, ` +
            `expected float32 [1, ${R}, ${H}] or [${R}, ${H}] (hidden_size ${H})`,
          output,
        );
      }
      const data = new Float32Array((await y.getData()) as Float32Array);
      y.dispose();
      return data;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  async dispose(): Promise<void> {
    await this.queue;
    await this.session.release();
  }
}

/** Names, and the dimensions the graph states, against what the route feeds and reads. */
function checkSignature(session: Ort.InferenceSession, src: HfOnnxEncoder, hidden: number): void {
  const { inputNames, outputNames } = session;
  const { nMels, chunkFrames } = src.layout;
  if (!inputNames.includes(src.input)) {
    throw new ModelLoadError(
      src.file,
      `expected an input named "${src.input}" (float32 [chunks, ${nMels}, ${chunkFrames}]), ` +
        `found ${JSON.stringify(inputNames)}: not an onnx-community audio encoder export`,
      src.input,
    );
  }
  if (!outputNames.includes(src.output)) {
    throw new ModelLoadError(
      src.file,
      `expected an output named "${src.output}", found ${JSON.stringify(outputNames)}: not an onnx-community audio encoder export`,
      src.output,
    );
  }
  const meta = (list: readonly Ort.InferenceSession.ValueMetadata[] | undefined, name: string) => {
    const m = list?.find((v) => v.name === name);
    return m && m.isTensor ? m.shape : undefined;
  };
  // Symbolic dimensions (strings) are left to the run-time check.
  const inShape = meta(session.inputMetadata, src.input);
  if (
    inShape &&
    inShape.length === 3 &&
    [inShape[1], inShape[2]].some((v, i) => typeof v === 'number' && v !== [nMels, chunkFrames][i])
  ) {
    throw new ModelLoadError(
      src.file,
      `input "${src.input}" is [${inShape.join(', ')}], expected [chunks, ${nMels}, ${chunkFrames}]`,
      src.input,
    );
  }
  const outShape = meta(session.outputMetadata, src.output);
  const width = outShape?.at(-1);
  if (typeof width === 'number' && width !== hidden) {
    throw new ModelLoadError(
      src.file,
      `output "${src.output}" is ${width} values wide, the decoder's hidden_size is ${hidden}: this audio encoder belongs to another model`,
      src.output,
    );
  }
}
