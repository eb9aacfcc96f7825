/**
 * Progress amounts as words, shared by the demo's bars and the CLI's progress line, so both
 * say the same thing for the same ProgressEvent.
 */
import type { ProgressEvent } from '../types.js';

export function formatBytes(b: number): string {
  if (!Number.isFinite(b) || b < 0) return '–';
  if (b < 2 ** 20) return `${(b / 2 ** 10).toFixed(0)} KiB`;
  if (b < 2 ** 30) return `${(b / 2 ** 20).toFixed(1)} MiB`;
  return `${(b / 2 ** 30).toFixed(2)} GiB`;
}

/** "1.2 MiB of 3.4 MiB" for a byte-counted phase, "12 of 24 pipelines" for compilation, else nothing. */
export function progressNote(e: ProgressEvent): string | undefined {
  if (e.bytes) return `${formatBytes(e.bytes.loaded)} of ${formatBytes(e.bytes.total)}`;
  if (e.pipelines) return `${e.pipelines.compiled} of ${e.pipelines.total} pipelines`;
  return undefined;
}
