/**
 * Turns any failure into what a person can act on: a title, the library's own message
 * (which already says what was wrong), and at most one button that fixes the usual case.
 * Errors may arrive from a worker as plain objects, so this branches on `code`, never on
 * `instanceof`.
 */
import { hasFixedBudget } from '../research.js';

export interface UiAction {
  label: string;
  /** What the app does when the button is pressed. */
  kind: 'use-cpu' | 'lower-budget' | 'reload-model';
  budget?: number;
}

export interface UiMessage {
  level: 'error' | 'info';
  /** The WnwError code, when there is one (the page exposes it as data-code for tests and styling). */
  code?: string;
  title: string;
  body: string;
  hint?: string;
  action?: UiAction;
}

export const BUDGETS = [0.1, 0.2, 0.4, 0.6, 0.8] as const;

export const WEBGPU_HELP =
  'WebGPU works in Chrome and Edge 113 or newer on Windows, macOS and ChromeOS, and in Firefox 141+ on Windows. ' +
  'On Linux, start Chrome with --enable-unsafe-webgpu --enable-features=Vulkan; in Safari 26 turn on the WebGPU feature flag ' +
  '(Develop → Feature Flags). Check chrome://gpu if it still fails.';

/** The next budget down from the one that did not fit, or null when already at the floor. */
export function lowerBudget(policy: string, budget: number): number | null {
  // A policy at a fixed budget (the full cache) steps down to WnW's default.
  if (hasFixedBudget(policy)) return 0.2;
  const lower = BUDGETS.filter((b) => b < budget - 1e-9);
  return lower.length ? lower[lower.length - 1] : null;
}

export function describeError(e: unknown, ctx: { policy: string; budget: number; backend: string }): UiMessage {
  const m = describe(e, ctx);
  const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : '';
  return code ? { ...m, code } : m;
}

function describe(e: unknown, ctx: { policy: string; budget: number; backend: string }): UiMessage {
  const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : '';
  const body =
    e instanceof Error || (typeof e === 'object' && e !== null && 'message' in e)
      ? String((e as { message: unknown }).message)
      : String(e);
  switch (code) {
    case 'NO_WEBGPU':
      return {
        level: 'error',
        title: 'This browser cannot use WebGPU',
        body,
        hint: WEBGPU_HELP,
        action: { kind: 'use-cpu', label: 'Use the CPU backend instead (slower)' },
      };
    case 'BAD_AUDIO':
      return {
        level: 'error',
        title: 'This audio cannot be transcribed',
        body,
        hint: 'Use a recording with sound in it, as WAV (PCM 16/24-bit or float), MP3, OGG/Opus, FLAC or M4A.',
      };
    case 'OUT_OF_MEMORY':
    case 'CONTEXT_TOO_LONG': {
      // A budget sizes the KV pool: it cannot shrink the prompt's prefill buffers.
      if ((e as { limit?: unknown }).limit === 'prompt-binding') {
        return {
          level: 'error',
          title: 'This recording is too long for this device',
          body,
          hint: 'Split the recording into shorter parts and transcribe them one by one.',
        };
      }
      const next = lowerBudget(ctx.policy, ctx.budget);
      return {
        level: 'error',
        title: 'Not enough GPU memory for this recording',
        body,
        hint:
          next === null
            ? 'Even the lowest budget does not fit: try a shorter clip, or close other tabs that use the GPU.'
            : `A lower GPU budget keeps less of the audio on the GPU; WnW recalls the rest from main memory when the transcript reaches it.`,
        ...(next === null
          ? {}
          : { action: { kind: 'lower-budget', label: `Retry with WnW at budget ${next}`, budget: next } }),
      };
    }
    case 'MODEL_TOO_BIG':
      return {
        level: 'error',
        title: 'This model does not fit this GPU in its weight format',
        body,
        hint: 'Convert the folder to 4-bit once (npx wnw convert HF_DIR OUT_DIR --quant q4) and open the converted folder, or use the CPU backend.',
        action: { kind: 'use-cpu', label: 'Use the CPU backend instead (slower)' },
      };
    case 'MODEL_LOAD':
      return {
        level: 'error',
        title: 'The model could not be loaded',
        body,
        hint: 'The page looks for the model under models/wnw-ref/ next to it (or the folder given by ?model=). Check that every file is there.',
      };
    case 'DEVICE_LOST':
      return {
        level: 'error',
        title: 'The GPU stopped responding',
        body,
        hint:
          'The transcript so far is kept below. ' +
          'Transcribing again sets the model up on a new GPU device by itself; reloading is only needed if that fails too.',
        action: { kind: 'reload-model', label: 'Reload the model' },
      };
    case 'CANCELLED':
      return {
        level: 'info',
        title: 'Stopped',
        body: 'Transcription was cancelled. The transcript so far is kept below.',
      };
    default:
      return {
        level: 'error',
        title: 'Something went wrong',
        body: body || 'Unknown error',
        hint: ctx.backend === 'webgpu' ? 'If it keeps happening, try the CPU backend.' : undefined,
      };
  }
}

/** Checked before anything loads, so the page can say so up front instead of failing on the first click. */
export function webGpuMissing(): UiMessage | null {
  if (typeof navigator !== 'undefined' && 'gpu' in navigator && navigator.gpu) return null;
  return {
    level: 'info',
    title: 'No WebGPU in this browser: using the CPU backend',
    body: 'Transcription still works here, on the CPU, but much more slowly than on a GPU.',
    hint: WEBGPU_HELP,
  };
}
