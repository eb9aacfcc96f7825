/**
 * Every failure a user can cause or meet is one of these classes, so callers can
 * branch on `code` and show `message`, which always says what was wrong and what to do.
 */
export type WnwErrorCode =
  | 'NO_WEBGPU'
  | 'DEVICE_LOST'
  | 'OUT_OF_MEMORY'
  | 'CONTEXT_TOO_LONG'
  | 'MODEL_LOAD'
  | 'BAD_AUDIO'
  | 'BAD_ARGUMENT'
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

/** The KV pool cannot hold the requested context; raised before any GPU work. */
export class ContextTooLongError extends WnwError {
  constructor(
    readonly neededBytes: number,
    readonly availableBytes: number,
    detail: string,
  ) {
    super(
      'CONTEXT_TOO_LONG',
      `${detail}: needs ${(neededBytes / 2 ** 20).toFixed(1)} MiB of KV memory, ` +
        `the pool holds ${(availableBytes / 2 ** 20).toFixed(1)} MiB. ` +
        'Use a lower GPU budget (e.g. policy "wnw" with budget 0.2), a shorter clip, or a larger kvBudgetBytes.',
    );
    this.name = 'ContextTooLongError';
  }
}

export class NoWebGpuError extends WnwError {
  constructor(detail: string) {
    super(
      'NO_WEBGPU',
      `WebGPU is not available (${detail}). Use Chrome or Edge 113+, or Firefox/Safari with WebGPU enabled; ` +
        'in Chromium on Linux start with --enable-unsafe-webgpu --enable-features=Vulkan. ' +
        'The CPU backend (backend: "cpu") works everywhere, more slowly.',
    );
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

export class DeviceLostError extends WnwError {
  constructor(reason: string) {
    super('DEVICE_LOST', `The GPU device was lost (${reason}). Reload the model to continue.`);
    this.name = 'DeviceLostError';
  }
}

export class CancelledError extends WnwError {
  constructor() {
    super('CANCELLED', 'Transcription was cancelled.');
    this.name = 'CancelledError';
  }
}
