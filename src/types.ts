/** The public surface's types: what `loadTranscriber` takes and `transcribe` returns. */
import type { BackendKind } from './backend/types.js';
import type { LiveOptions, LiveResult } from './transcribe/live.js';
import type { KvPrecision } from './kv/precision.js';
import type { WeightFormat } from './model/quant.js';
import type { PolicyName } from './policy/registry.js';

export type { PolicyName };

/**
 * Loading: `download` (reading the weights), `convert` (packing them to f16/q4 where the
 * folder is not converted yet), `upload` (writing them into GPU buffers; WebGPU only),
 * `compile` (pipeline creation). A Hugging Face folder packed at load converts each tensor
 * as it is read, so download and convert events alternate.
 */
export type ProgressPhase = 'download' | 'convert' | 'upload' | 'compile' | 'encode' | 'prefill' | 'decode';

export interface ProgressEvent {
  phase: ProgressPhase;
  /** 0..1 within the phase (decode: share of the audio covered, estimated from the anchors). */
  fraction: number;
  detail?: string;
  /**
   * Download: bytes of the decoder's tensors read from the shards so far; convert: bytes of
   * them packed so far; upload: bytes of the packed weights written to the GPU so far; each of `total`.
   */
  bytes?: { loaded: number; total: number };
  /** Compile: pipelines ready, of those the decoder asked for. */
  pipelines?: { compiled: number; total: number };
}

export interface LoadOptions {
  /**
   * URL or folder of the model: our own layout (config.json, decoder.safetensors,
   * encoder.onnx, tokenizer.json) or a Hugging Face folder of Voxtral, Qwen2-Audio or
   * Qwen2.5-Omni (config.json, safetensors shards, tokenizer files); heads.json beside
   * either for WnW.
   */
  model: string;
  /**
   * Language of the speech as an ISO code ("en"), for models whose prompt names it
   * (Voxtral, Qwen2-Audio, Qwen2.5-Omni); omitted or "none": the prompt without a language
   * (the model detects it). Any other value is a BAD_ARGUMENT.
   */
  language?: string;
  /**
   * A Hugging Face folder that holds an ONNX audio encoder (onnx/audio_encoder*.onnx) runs it
   * by default; 'audio-tower' runs the checkpoint's audio tower instead (the route checked
   * against PyTorch), 'onnx' makes a missing graph an error.
   */
  audioEncoder?: 'onnx' | 'audio-tower';
  /**
   * The KV policy of every call. Default: 'wnw' where the folder has its heads.json, else
   * 'full' (said through onProgress); 'wnw' or 'audiokv' asked for without it is a BAD_ARGUMENT.
   */
  policy?: PolicyName;
  /** Target r_GPU: share of the audio KV kept on the GPU (ignored by 'full'). */
  budget?: number;
  /**
   * 'auto' (default): WebGPU on a hardware adapter, else the CPU. The adapter is asked for
   * before the model is read, and a model its limits cannot hold (or too large for the
   * memory the browser reports) is a ModelTooBigError before any weight is read, under
   * 'auto' too: another weight format helps there, a CPU fallback would not.
   */
  backend?: 'auto' | BackendKind;
  /** Byte cap of the KV pool (a size, not an r_GPU `budget`); default: what the device allows. */
  kvMaxBytes?: number;
  /**
   * Seconds of the longest recording this transcriber is loaded for, when known (the CLI
   * knows its file): on WebGPU a recording whose weights, buffers and KV pool the device
   * cannot hold is then refused before any weight is read, with the minutes that would fit.
   */
  audioSeconds?: number;
  /**
   * Bytes of host memory the CPU backend may take (its weights, KV and prefill): a model
   * that needs more is a ModelTooBigError before any weight is read. Default: the
   * WNW_HOST_MEMORY_BYTES environment variable where set, else in Node the memory the system
   * has available, bounded by the process's cgroup limit; in a browser no host check.
   */
  hostMemoryBytes?: number;
  /** What the KV pool stores keys and values as: 'f32' (default) or 'f16' (half the GPU KV memory and recall traffic). */
  kvPrecision?: KvPrecision;
  /**
   * What the decoder's weight matrices are stored and multiplied in: 'f32' (default; the
   * reference model), 'f16' or group-wise 4-bit 'q4' (a quarter of f16's memory). Both
   * backends compute with the same values.
   */
  weightFormat?: WeightFormat;
  /**
   * What a Hugging Face folder's audio tower stores its Linear weights in (the CPU encoder
   * computes with the same values). Default: the decoder's format where that is f32 or f16,
   * f16 beside a q4 decoder (a q4 tower moves the audio embeddings more than a q4 decoder
   * moves its logits), and q4 where the device's reported memory cannot hold the f16 tower
   * beside the decoder while encoding (the route's label says so).
   */
  audioWeightFormat?: WeightFormat;
  /**
   * In a browser with OPFS, packed decoder weights (f16/q4 packed at load from an
   * unconverted Hugging Face folder, or read from a folder `npx wnw convert` wrote) are kept
   * there, and the next load of the same folder reads them instead of the shards; false
   * turns this off. Default true. `clearWeightCache()` empties it.
   */
  cache?: boolean;
  /** The load's phases as they go: download, convert, upload, compile, with bytes or pipelines where known. */
  onProgress?: (e: ProgressEvent) => void;
  /**
   * Cancels the load: the download, convert and upload stop at their next progress event,
   * compilation at once; the load rejects with a CancelledError naming the phase, and every
   * GPU buffer it had made is freed.
   */
  signal?: AbortSignal;
}

export interface Word {
  word: string;
  /** Seconds from the start of the audio, estimated from the anchor heads' attention. */
  start: number;
  end: number;
}

/** One decode step, as the demo's tide chart draws it. */
export interface StepStats {
  step: number;
  token: number;
  /** The whole transcript so far (onToken gets one piece at a time). */
  text: string;
  /** GPU KV pages in use, bytes. */
  gpuKvBytes: number;
  /** Text KV pages in use, all heads: they are taken as tokens are generated. */
  textKvPages: number;
  rGpu: number;
  bytesToGpu: number;
  msPerToken: number;
  /** Audio position with the most anchor attention this step (audio token index), -1 if none. */
  focus: number;
  /** For the tidal heads: per 2 s segment, the share of tidal heads holding it fully on the GPU. */
  tidalSegments?: Float32Array;
  /** Anchor attention summed per segment. */
  anchorAttention?: Float32Array;
}

/** The KV cache: the share of the audio KV the GPU held over the run, and the memory it took at the end. */
export interface KvStats {
  /** Mean and peak r_GPU over decode steps. */
  rGpu: number;
  rGpuPeak: number;
  /** Share of the audio KV held on the GPU or in CPU memory at the end. */
  rGpuCpu: number;
  /** GPU KV memory in use at the end, bytes; and CPU offload bytes. */
  gpuKvBytes: number;
  cpuKvBytes: number;
  /** Text KV pages in use at the end, all heads (prompt and generated tokens). */
  textKvPages: number;
}

/** What the policy's plans moved between CPU and GPU, per decode step (the recall before the first step counted). */
export interface TrafficStats {
  /** CPU -> GPU MB per decode step: mean and max. */
  mbPerStep: number;
  mbPerStepMax: number;
  recallsPerStep: number;
  releasesPerStep: number;
}

export interface TimingStats {
  msPerToken: number;
  prefillMs: number;
  /** Audio → embeddings: front-end, encoder and projector. */
  encodeMs: number;
  /** Encode, prefill and decode time over the audio's duration. */
  realTimeFactor: number;
}

export interface TranscriptionStats {
  policy: PolicyName;
  budget: number;
  backend: string;
  /**
   * Bytes of the audio encoder's weights while loaded (ONNX: the graph's size): the loaded
   * model's, like `backend`, not the run's KV, so it is not under `kv`.
   */
  encoderBytes?: number;
  audioSeconds: number;
  audioTokens: number;
  decodeSteps: number;
  stoppedBy: 'eos' | 'length-guard' | 'cancelled' | 'error';
  /** The stop token the model chose when `stoppedBy` is 'eos' (a model may have several). */
  stopToken?: number;
  /**
   * What the run did but the model may not do well, one sentence each: e.g. a recording past
   * an audio length the model card states (Voxtral: 30 min for transcription). Absent when none.
   */
  warnings?: string[];
  /**
   * Steps from the step a plan was made from to the step it took effect at (the policy's
   * planLag for this clip): 2 where each step was queued before the last was read. Absent
   * where the page did not learn it (a worker lost mid-run).
   */
  planLag?: 1 | 2;
  kv: KvStats;
  traffic: TrafficStats;
  timing: TimingStats;
  prompt: PromptStats;
}

/**
 * The prompt's positions a request took from the recording's session and the ones it ran
 * itself: a recording's later request reuses the audio (and, for a follow-up question, the
 * conversation) and prefills only its own ids; a fresh one prefills the whole prompt.
 */
export interface PromptStats {
  reusedPositions: number;
  prefilledPositions: number;
}

export interface TranscribeOptions {
  /** Cancels the call: it resolves with the text decoded so far and `error` a CancelledError. */
  signal?: AbortSignal;
  /** Each decoded token's text as it comes (and its id). */
  onToken?: (text: string, token: number) => void;
  /** Each decode step's figures: r_GPU, CPU→GPU bytes, the anchors' focus, the tidal segments on the GPU. */
  onStep?: (s: StepStats) => void;
  /** The call's phases: encode, prefill, decode. */
  onProgress?: (e: ProgressEvent) => void;
  /** Override the load-time policy/budget for this call. */
  policy?: PolicyName;
  /** Override the load-time language (Hugging Face models; "none" for no language): the prompt is rebuilt for it. */
  language?: string;
  /**
   * 'transcribe' (default): the speech as said; 'translate': the speech translated into
   * `targetLanguage`, with the family's translation prompt (Hugging Face models whose recipe
   * has one; others refuse it with a BAD_ARGUMENT).
   */
  task?: 'transcribe' | 'translate';
  /** The language code a translation is into ("de"); task 'translate' only, where it is required. */
  targetLanguage?: string;
  /** Override the load-time target r_GPU for this call. */
  budget?: number;
  /**
   * The policy's method options, e.g. { topChunks: 4 } for wnw (docs/wnw-method.md); ablations are
   * evaluation's (npm run eval -- --policies wnw:KEY=VALUE) and a BAD_ARGUMENT here.
   */
  policyOptions?: Record<string, string | number | boolean>;
  /** Cap on generated tokens; default 6 per audio second. */
  maxNewTokens?: number;
  /**
   * Evaluation only (research entry): teacher forcing, prefill reuse and per-step hooks. A
   * worker transcriber forwards the data fields and refuses the hooks (functions cannot be posted).
   */
  probe?: Probe;
}

/**
 * What an evaluation asks of a run beyond the transcript. `forcedTokens` and
 * `reusePrefill` are data; the `on*` hooks are called on the transcriber's thread, so
 * only an in-thread transcriber (`loadTranscriber`) takes them.
 */
export interface Probe {
  /** Keep the prefill for the next call on the same encoding (evaluation runs many policies per clip). */
  reusePrefill?: boolean;
  /**
   * Teacher forcing: decode step i feeds forcedTokens[i] instead of the previous greedy
   * token, and the run ends after the last one; the policy's recalls and releases run as
   * in free decoding. maxNewTokens is then ignored.
   */
  forcedTokens?: readonly number[];
  /** Each decode step's logits over the vocabulary (the backend is asked to return them). */
  onLogits?: (step: number, logits: Float32Array) => void;
  /**
   * Every KV head's audio attention at each decode step (per head, softmax weights summed
   * over its query heads, 0 where a position is not on the GPU); the backend is asked to
   * export all heads.
   */
  onAttention?: (step: number, weights: readonly Float32Array[]) => void;
  /**
   * At each decode step, which audio positions of which head the step's attention could
   * read (the residency in force for it, before the step's plan applies).
   */
  onResidency?: (step: number, resident: (head: number, audioPos: number) => boolean) => void;
}

export interface TranscriptionResult {
  /** The transcript: the answer without a wrapper the model is known to put around it. */
  text: string;
  /** The answer as the model wrote it (the same as `text` for a model without a known wrapper). */
  rawText: string;
  /** The words of `text`, timed (a wrapper's words are not among them). */
  words: Word[];
  tokens: number[];
  stats: TranscriptionStats;
  /** Set when the run ended early (cancel or error): `text` holds what was decoded. */
  error?: Error;
}

export type AudioInput =
  | ArrayBuffer
  | Uint8Array
  | Blob
  | Float32Array
  | { getChannelData(i: number): Float32Array; numberOfChannels: number; sampleRate: number; length: number };

/** What a page shows of the loaded model. */
export interface ModelInfo {
  /** config.json's name, or the Hugging Face model type. */
  readonly name: string;
  /** The Hugging Face family (`voxtral`, `qwen2_audio`, `qwen2_5_omni`); null for wnw's own folders. */
  readonly family: string | null;
  /** The longest recording the model's positions hold, in seconds (a transcription's prompt and reply included). */
  readonly maxAudioSeconds: number;
  /** What it does besides transcribing: answer questions, translate (its prompt recipe has them). */
  readonly can: { readonly ask: boolean; readonly translate: boolean };
  /** Whether the folder has heads.json: WnW and AudioKV need it, the full cache and the other policies do not. */
  readonly heads: boolean;
  /** What turns audio into embeddings, and where (e.g. "ONNX audio encoder (onnxruntime-web, wasm)"). */
  readonly audioRoute: string;
}

/**
 * Live captions: audio appended as it comes, the committed text said through
 * `LiveOptions.onText`, and at `stop` the whole recording open for requests.
 */
export interface LiveRecording {
  /** Seconds of audio appended so far. */
  readonly audioSeconds: number;
  /** 16 kHz mono samples; resolves when the ticks they call for have run. The caller's array stays its own. */
  append(samples: Float32Array): Promise<void>;
  stop(): Promise<LiveResult>;
}

/**
 * What `loadTranscriber` and `loadTranscriberInWorker` return: a page switches between the
 * two by changing the call.
 */
export interface Transcriber {
  /** What runs the decoder, e.g. "WebGPU (…)" or "CPU (TypeScript reference decoder)". */
  readonly backend: string;
  /**
   * Why the decoder runs on the CPU though `backend: 'auto'` looked for WebGPU, in one
   * sentence (no WebGPU here, only a software adapter, Dawn not installed, …); null when it
   * runs where it was asked to.
   */
  readonly backendReason: string | null;
  /** One request on a recording: `open`, the request, `dispose`. */
  transcribe(input: AudioInput, options?: TranscribeOptions): Promise<TranscriptionResult>;
  /**
   * Encodes and keeps a recording for many requests: the first prefills the audio, the next
   * ones reuse its KV and prefill only their own ids. A transcriber keeps one recording: a
   * new `open` disposes the one before.
   */
  open(input: AudioInput, options?: RecordingOptions): Promise<Recording>;
  /** Live captions from audio appended as it comes (docs/usage.md#live). */
  live(options?: LiveOptions): LiveRecording;
  /**
   * The head triage WnW needs (heads.json) for a model that ships none, computed on this
   * transcriber's own device with the weights it holds: two teacher-forced forwards per clip
   * (docs/calibrate-real-model.md). Each clip runs as one request among the others, so
   * transcriptions go on meanwhile (with the full cache until it ends). In a page the finished
   * clips and the result are kept in the browser for this folder: a stopped run resumes, and
   * the next load finds the heads. Once it resolves, `policy: 'wnw'` runs with them.
   */
  calibrate(clips: CalibrationClip[], options?: CalibrateOptions): Promise<Calibration>;
  readonly modelInfo: ModelInfo;
  /** Frees every GPU buffer (and, in a worker, the worker). */
  dispose(): void;
  /** `await using asr = await loadTranscriber(…)` disposes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A calibration clip: speech with its transcript and word times (as calibration-data/'s NAME.json beside NAME.wav). */
export interface CalibrationClip {
  /** Its name: a resumed run knows the clips it finished by it. */
  id: string;
  text: string;
  /** Each word's span in seconds; a word whose `confidence` is under 0.85 is not scored. */
  words: Array<{ word: string; start: number; end: number; confidence?: number }>;
  /** The transcript's token ids, where a clip ships them for this very model (else `text` is tokenised). */
  tokens?: number[];
  /** The audio: a URL (fetched when its turn comes), a file's bytes, or a Blob. */
  audio: string | ArrayBuffer | Uint8Array | Blob;
  /** Its duration, where known beforehand: weighs it in the time left before it is encoded. */
  seconds?: number;
}

/** Where a calibration is and what it expects still to take. */
export interface CalibrationProgress {
  /** The clip under way (1-based), of `clips`, and its id. */
  clip: number;
  clips: number;
  id: string;
  /** KV heads of the current clip whose Head Sensitivity is done, of `heads` (the answer path does them all at once). */
  head: number;
  heads: number;
  /** Share of the run's forwards done (clips kept from an earlier run count as done). */
  fraction: number;
  /** Seconds still expected, from this run's measured time per forward; null before the first forward is timed. */
  secondsLeft: number | null;
  /** A clip just finished (reused: taken from what a stopped run kept). */
  finished?: { seconds: number; reused: boolean };
}

export interface CalibrateOptions {
  /** The clips' language (a code such as "en"), for a model whose prompt names it; default the load's. */
  language?: string;
  /** Stops between clips: `calibrate` rejects with CANCELLED, and the finished clips stay kept for the next run. */
  signal?: AbortSignal;
  /** After each clip's forwards and as each clip finishes: the clip, the share done, the seconds left. */
  onProgress?: (p: CalibrationProgress) => void;
}

export interface Calibration {
  /** heads.json's content: save it into the model folder to use it anywhere. */
  heads: import('./model/heads.js').HeadsFile;
  /** Whether it was stored in this browser for the folder (a page's next load uses it). */
  stored: boolean;
  seconds: number;
}

export interface RecordingOptions {
  /** Cancels the encode: `open` rejects with a CancelledError. */
  signal?: AbortSignal;
  /** The encode's progress. */
  onProgress?: (e: ProgressEvent) => void;
  /**
   * The system message of every request on the recording (chat-template models): one for
   * all, so they share the prompt up to the end of the audio. Default: the model's
   * transcription one (Qwen2.5-Omni: "You are a speech recognition model."; Qwen2-Audio:
   * none). null: none. Voxtral takes none with audio.
   */
  system?: string | null;
}

/** A request's options on a recording: a transcription's, the task named by the method. */
export type RequestOptions = Omit<TranscribeOptions, 'task' | 'targetLanguage'>;

/**
 * An encoded recording and the KV of its last request. Each request rolls the KV back to
 * where it forks (the end of the audio, or of the conversation for a follow-up question)
 * and prefills only its own ids; a request with another policy (or budget, or readouts)
 * prefills the audio again from the kept encoding. Requests run one at a time.
 */
export interface Recording {
  readonly audioSeconds: number;
  /** What the model's prompt recipe asks besides a transcription: questions, translations (a transcription-only model: neither). */
  readonly can: { readonly ask: boolean; readonly translate: boolean };
  transcribe(options?: RequestOptions): Promise<TranscriptionResult>;
  /** The speech translated into `targetLanguage` (a code such as "de"), where the model's prompt recipe has a translation. */
  translate(targetLanguage: string, options?: RequestOptions): Promise<TranscriptionResult>;
  /**
   * An answer to `question` about the recording; after a question it continues that
   * conversation (`fresh: true` starts from the audio). Models whose prompt is for
   * transcription only refuse it (BAD_ARGUMENT).
   */
  ask(question: string, options?: RequestOptions & { fresh?: boolean }): Promise<TranscriptionResult>;
  /**
   * SRT or WebVTT cues cut from `from`'s dated words where it is a transcription's result (a
   * live recording's words are not dated: transcribe it first). With request options instead
   * (or none), from the transcription those options give: the recording's last one where it
   * ran with the same options on the same placement of the audio (a request repeated there
   * gives the same answer), else one run now.
   */
  subtitles(format: 'srt' | 'vtt', from?: TranscriptionResult | RequestOptions): Promise<string>;
  /** Frees the recording's KV and encoding; later calls are a BAD_ARGUMENT. */
  dispose(): void;
}
