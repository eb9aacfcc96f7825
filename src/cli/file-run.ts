/**
 * What the commands that run one recording share: their I/O, its bytes read and decoded
 * before the model loads (a bad file fails fast and alone), the progress line they redraw,
 * the transcriber loaded for it with the command line's options, and what --json prints.
 */
import { progressNote } from '../transcribe/progress-note.js';
import { formatResult, jsonOutput, oneLine } from '../output-formats.js';
import type { TranscribeArgs } from './args.js';
import { hasFixedBudget } from '../research.js';
import type { LoadOptions, ProgressEvent, Transcriber } from '../index.js';

export { formatResult, jsonOutput, oneLine };

export interface CliIo {
  load: (options: LoadOptions) => Promise<Transcriber>;
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  readFile: (path: string) => Promise<Uint8Array>;
  /** File bytes to 16 kHz mono: run before the model loads, so a bad file fails fast and alone. */
  decode: (bytes: Uint8Array) => Promise<Float32Array>;
  /** Live progress redraws one stderr line; off when stderr is a file or pipe. */
  tty: boolean;
  /** Aborted by Ctrl-C: the partial transcript is still printed. */
  signal?: AbortSignal;
}

/** "download  42% decoder weights (1.20 GiB of 2.85 GiB)", "compile  50% decoder kernels (12 of 24 pipelines)". */
export function progressLine(e: ProgressEvent): string {
  const pct = Math.round(Math.max(0, Math.min(1, e.fraction)) * 100);
  const note = progressNote(e);
  return `${e.phase} ${String(pct).padStart(3)}%${e.detail ? ` ${e.detail}` : ''}${note ? ` (${note})` : ''}`;
}

/** The file as 16 kHz mono, or null after saying on stderr why it cannot be read. */
export async function readAudio(file: string, io: CliIo): Promise<Float32Array | null> {
  let bytes: Uint8Array;
  try {
    bytes = await io.readFile(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : oneLine(e);
    io.stderr(`wnw: cannot read ${file}: ${why}\n`);
    return null;
  }
  if (bytes.byteLength === 0) {
    io.stderr(`wnw: ${file} is empty (0 bytes)\n`);
    return null;
  }
  try {
    return await io.decode(bytes);
  } catch (e) {
    io.stderr(`wnw: ${file}: ${oneLine(e)}\n`);
    return null;
  }
}

/** One stderr line redrawn with the latest progress (a terminal only), and its clearing. */
export function progressDrawer(io: CliIo): { onProgress: (e: ProgressEvent) => void; clear: () => void } {
  let lastLine = '';
  return {
    onProgress: (e) => {
      if (!io.tty) return;
      const line = progressLine(e);
      if (line !== lastLine) io.stderr(`\r\x1b[2K${(lastLine = line)}`);
    },
    clear: () => {
      if (io.tty && lastLine) io.stderr('\r\x1b[2K');
    },
  };
}

type LoadArgs = Omit<TranscribeArgs, 'file' | 'format' | 'task' | 'targetLanguage'>;

/** The transcriber for a recording of `seconds`, as the command line's options ask; says on stderr what runs it. */
export async function loadFor(
  args: LoadArgs,
  seconds: number,
  io: CliIo,
  onProgress: (e: ProgressEvent) => void,
  clear: () => void,
): Promise<Transcriber> {
  const asr = await io.load({
    model: args.model,
    policy: args.policy,
    budget: args.budget,
    backend: args.backend,
    kvPrecision: args.kv,
    weightFormat: args.weights,
    audioSeconds: seconds,
    ...(args.language !== undefined ? { language: args.language } : {}),
    ...(args.audioEncoder ? { audioEncoder: args.audioEncoder } : {}),
    ...(args.audioWeights ? { audioWeightFormat: args.audioWeights } : {}),
    onProgress,
  });
  clear();
  if (args.policyNote) io.stderr(`wnw: ${args.policyNote}\n`);
  // Said every time, not only for auto: a CPU fallback is 10-100x slower and people should know why.
  io.stderr(
    `wnw: backend ${asr.backend}${args.backend === 'auto' ? ` (auto${asr.backendReason ? `: ${asr.backendReason}` : ''})` : ''}; ` +
      `policy ${args.policy}${hasFixedBudget(args.policy) ? '' : ` at budget ${args.budget}`}\n`,
  );
  return asr;
}
