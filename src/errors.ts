/**
 * Every failure a user can cause or meet is one of these classes, so callers can
 * branch on `code` and show `message`, which always says what was wrong and what to do.
 */
export type WnwErrorCode =
  | 'NO_WEBGPU'
  | 'DEVICE_LOST'
  | 'OUT_OF_MEMORY'
  | 'CONTEXT_TOO_LONG'
  | 'MODEL_TOO_BIG'
  | 'MODEL_LOAD'
  | 'BAD_AUDIO'
  | 'BAD_ARGUMENT'
  | 'WORKER_FAILED'
  | 'CANCELLED';

export class WnwError extends Error {
  constructor(
    readonly code: WnwErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'WnwError';
  }
}

/** A model file is missing, truncated, or disagrees with config.json. */
export class ModelLoadError extends WnwError {
  constructor(
    readonly file: string,
    message: string,
    readonly tensor?: string,
  ) {
    super('MODEL_LOAD', `${file}${tensor ? ` (tensor ${tensor})` : ''}: ${message}`);
    this.name = 'ModelLoadError';
  }
}

/** Audio that cannot be decoded, is empty, or has an unsupported encoding. */
export class AudioError extends WnwError {
  constructor(message: string) {
    super('BAD_AUDIO', message);
    this.name = 'AudioError';
  }
}

/**
 * The requested context does not fit; raised before the GPU work that would fail.
 * `limit` says which limit, and so what helps: the KV budget ('pool'), the largest buffer
 * the device binds, for one of the KV pool's buffers ('pool-binding': a lower budget or f16
 * shrinks it) or one of the prompt's ('prompt-binding': only a shorter recording helps).
 * For the model's own positions see `PositionsExceededError`.
 */
export class ContextTooLongError extends WnwError {
  constructor(
    readonly neededBytes: number,
    readonly availableBytes: number,
    detail: string,
    readonly limit: 'pool' | 'pool-binding' | 'prompt-binding' = 'pool',
  ) {
    const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
    const advice = {
      pool:
        `: needs ${mib(neededBytes)} of KV memory, the pool holds ${mib(availableBytes)}. ` +
        'Use a lower GPU budget (e.g. policy "wnw" with budget 0.2), kvPrecision "f16", a shorter clip, or a larger kvMaxBytes.',
      'pool-binding':
        ` (${mib(availableBytes)} is the most this device binds as one buffer). ` +
        'Use a lower GPU budget, kvPrecision "f16", or a shorter clip.',
      'prompt-binding': ` (${mib(availableBytes)} is the most this device binds as one buffer). Use a shorter clip, or split the recording.`,
    }[limit];
    super('CONTEXT_TOO_LONG', `${detail}${advice}`);
    this.name = 'ContextTooLongError';
  }
}

/**
 * The prompt (prefix, audio, instruction) needs more positions than the model has
 * (`max_position_embeddings`): raised before the audio is encoded, since the decoder would
 * run past what it knows without a word. `minutesThatFit` is the longest recording whose
 * prompt the positions hold.
 */
export class PositionsExceededError extends WnwError {
  constructor(
    readonly neededPositions: number,
    readonly maxPositions: number,
    readonly minutesThatFit: number,
    where: string,
  ) {
    super(
      'CONTEXT_TOO_LONG',
      `${where}: the prompt needs ${neededPositions} positions, the model has ${maxPositions} (max_position_embeddings in its config.json). ` +
        `At most ${minutesThatFit.toFixed(1)} min of audio fit: split the recording into parts of that length.`,
    );
    this.name = 'PositionsExceededError';
  }
}

/**
 * A decoder weight tensor this device cannot bind in the requested format (a layer matrix
 * larger than `maxStorageBufferBindingSize` or `maxBufferSize`), decoder weights past
 * twice the memory the browser reports, or, where the recording is known, weights plus its
 * buffers and KV pool past the device's memory or bindings; raised from the config, before
 * any weight is read. `problems` names each tensor or buffer, its bytes and the limit; the
 * message says which format fits (usually q4) and, for a recording too long,
 * `minutesThatFit`: how much audio would fit at the same budget and precision.
 */
export class ModelTooBigError extends WnwError {
  readonly minutesThatFit?: number;

  constructor(
    readonly problems: readonly { limit: string; what: string; bytes: number; limitBytes: number; message: string }[],
    where: string,
    wouldFit?: { minutes: number; text: string },
  ) {
    super(
      'MODEL_TOO_BIG',
      `${where}: ${problems.map((p) => p.message).join(' ')}${wouldFit ? ` ${wouldFit.text}` : ''}`,
    );
    this.name = 'ModelTooBigError';
    if (wouldFit) this.minutesThatFit = wouldFit.minutes;
  }
}

/** What a page that asked for WebGPU and found none can do about it. */
export const WEBGPU_BROWSER_HELP =
  'Use Chrome or Edge 113+, or Firefox/Safari with WebGPU enabled; ' +
  'in Chromium on Linux start with --enable-unsafe-webgpu --enable-features=Vulkan. ' +
  'The CPU backend (backend: "cpu") works everywhere, more slowly.';

export class NoWebGpuError extends WnwError {
  /**
   * `detail`: why, in one flat sentence (what an 'auto' fallback reports); `help`: what to do
   * here, which depends on where it ran (a browser's flags mean nothing to Node's Dawn).
   */
  constructor(
    readonly detail: string,
    help: string = WEBGPU_BROWSER_HELP,
  ) {
    super('NO_WEBGPU', `WebGPU is not available (${detail}).${help ? ` ${help}` : ''}`);
    this.name = 'NoWebGpuError';
  }
}

export class OutOfMemoryError extends WnwError {
  constructor(what: string, bytes: number) {
    super(
      'OUT_OF_MEMORY',
      `The GPU ran out of memory allocating ${what} (${(bytes / 2 ** 20).toFixed(1)} MiB). ` +
        'Choose a lower budget or a shorter clip, or close other GPU-heavy tabs.',
    );
    this.name = 'OutOfMemoryError';
  }
}

/**
 * The GPU device went away (a driver reset, another tab's memory, `device.destroy()`).
 * `text` is what the transcription had decoded when it happened ('' during loading or
 * encoding). The transcriber that saw it makes a new device on its next call.
 */
export class DeviceLostError extends WnwError {
  constructor(
    readonly reason: string,
    readonly text = '',
  ) {
    super(
      'DEVICE_LOST',
      `The GPU device was lost (${reason}). The next transcription makes a new device; if it is lost again, reload the page.`,
    );
    this.name = 'DeviceLostError';
  }

  /** The same loss, carrying the transcript decoded before it. */
  withText(text: string): DeviceLostError {
    return new DeviceLostError(this.reason, text);
  }
}

/**
 * The caller's AbortSignal fired. `phase` says where the work stopped (a load phase, or
 * encode / prefill / decode); `text` is what the transcription had decoded by then.
 */
export class CancelledError extends WnwError {
  constructor(
    readonly text = '',
    readonly phase?: string,
  ) {
    super('CANCELLED', `${phase ? `Cancelled during ${phase}` : 'Transcription was cancelled'}.`);
    this.name = 'CancelledError';
  }
}
