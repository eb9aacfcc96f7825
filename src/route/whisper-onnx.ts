/**
 * The ONNX route of a Hugging Face folder (src/model/hf/onnx-audio.ts): the family's Whisper
 * log-mel, cut as the upstream processor cuts it, through the folder's ONNX audio encoder
 * run by onnxruntime-web. Voxtral: the whole recording zero-padded to a multiple of 30 s,
 * one log-mel (one max) over it, reshaped to `audio_values` [chunks, 128, 3000]; each chunk
 * gives 375 rows of `audio_features` ([1, 375, hidden] or flat [375, hidden]: exports differ).
 * Chunks run one at a time, so memory stays one chunk's whatever the length.
 */
import type * as Ort from 'onnxruntime-web';
import { AudioError, CancelledError, ModelLoadError } from '../errors.js';
import { WhisperLogMel, WHISPER_MEL } from '../audio/whisper-mel.js';
import { loadOrt, type ExecutionProvider } from '../model/encoder.js';
import { isNode } from '../model/files.js';
import type { HfOnnxEncoder } from '../model/hf/onnx-audio.js';
import type { LoadedModel } from '../model/loader.js';
import type { AudioRoute, RouteOptions, RouteOutput } from './types.js';

const CHUNK_SAMPLES = 480_000;
const CHUNK_FRAMES = 3000;
const ROWS_PER_CHUNK = 375;
const N_MELS = 128;

export class WhisperOnnxRoute implements AudioRoute {
  readonly kind = 'onnx' as const;
  readonly weightBytes: number;
  private readonly fe = new WhisperLogMel({ ...WHISPER_MEL, nMels: N_MELS });
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
  }

  get label(): string {
    return `${this.src.modelType} ONNX audio encoder (onnxruntime-web, ${this.executionProvider}; ${this.src.file.split('/').pop()})`;
  }

  static async load(model: LoadedModel, src: HfOnnxEncoder, providers?: ExecutionProvider[]): Promise<WhisperOnnxRoute> {
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
    throw new ModelLoadError(src.file, `onnxruntime-web could not load the audio encoder (${eps.join(', ')}): ${lastError instanceof Error ? lastError.message : String(lastError)}`);
  }

  async encode(samples: Float32Array, opts: RouteOptions = {}): Promise<RouteOutput> {
    if (samples.length === 0) throw new AudioError('The audio is empty: at least one sample is needed.');
    const mel = this.fe.compute(samples, { padToMultipleOf: CHUNK_SAMPLES });
    const chunks = mel.frames / CHUNK_FRAMES;
    if (!Number.isInteger(chunks)) throw new Error(`a Voxtral log-mel of ${mel.frames} frames is not whole 30 s chunks`);
    const H = this.hidden;
    const out = new Float32Array(chunks * ROWS_PER_CHUNK * H);
    for (let c = 0; c < chunks; c++) {
      if (opts.signal?.aborted) throw new CancelledError();
      // audio_values[c] = the log-mel's columns [3000c, 3000(c+1)), mel-major.
      const x = new Float32Array(N_MELS * CHUNK_FRAMES);
      for (let m = 0; m < N_MELS; m++) x.set(mel.data.subarray(m * mel.frames + c * CHUNK_FRAMES, m * mel.frames + (c + 1) * CHUNK_FRAMES), m * CHUNK_FRAMES);
      out.set(await this.run(x), c * ROWS_PER_CHUNK * H);
      opts.onProgress?.(c + 1, chunks);
    }
    if (opts.signal?.aborted) throw new CancelledError();
    return { embeddings: out, audioLength: chunks * ROWS_PER_CHUNK };
  }

  private run(x: Float32Array): Promise<Float32Array> {
    const next = this.queue.then(async () => {
      const { input, output, file } = this.src;
      const result = await this.session.run({ [input]: new this.ort.Tensor('float32', x, [1, N_MELS, CHUNK_FRAMES]) });
      const y = result[output];
      const d = y.dims;
      const H = this.hidden;
      const ok = y.type === 'float32' && ((d.length === 3 && d[0] === 1 && d[1] === ROWS_PER_CHUNK && d[2] === H) || (d.length === 2 && d[0] === ROWS_PER_CHUNK && d[1] === H));
      if (!ok) {
        throw new ModelLoadError(file, `output "${output}" is ${y.type} [${d.join(', ')}] for one 30 s chunk, expected float32 [1, ${ROWS_PER_CHUNK}, ${H}] or [${ROWS_PER_CHUNK}, ${H}] (hidden_size ${H})`, output);
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
  if (!inputNames.includes(src.input)) {
    throw new ModelLoadError(src.file, `expected an input named "${src.input}" (float32 [chunks, ${N_MELS}, ${CHUNK_FRAMES}]), found ${JSON.stringify(inputNames)}: not an onnx-community audio encoder export`, src.input);
  }
  if (!outputNames.includes(src.output)) {
    throw new ModelLoadError(src.file, `expected an output named "${src.output}", found ${JSON.stringify(outputNames)}: not an onnx-community audio encoder export`, src.output);
  }
  const meta = (list: readonly Ort.InferenceSession.ValueMetadata[] | undefined, name: string) => {
    const m = list?.find((v) => v.name === name);
    return m && m.isTensor ? m.shape : undefined;
  };
  // Symbolic dimensions (strings) are left to the run-time check.
  const inShape = meta(session.inputMetadata, src.input);
  if (inShape && inShape.length === 3 && [inShape[1], inShape[2]].some((v, i) => typeof v === 'number' && v !== [N_MELS, CHUNK_FRAMES][i])) {
    throw new ModelLoadError(src.file, `input "${src.input}" is [${inShape.join(', ')}], expected [chunks, ${N_MELS}, ${CHUNK_FRAMES}]`, src.input);
  }
  const outShape = meta(session.outputMetadata, src.output);
  const width = outShape?.at(-1);
  if (typeof width === 'number' && width !== hidden) {
    throw new ModelLoadError(src.file, `output "${src.output}" is ${width} values wide, the decoder's hidden_size is ${hidden}: this audio encoder belongs to another model`, src.output);
  }
}
