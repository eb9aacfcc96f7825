/** The eval's dataset layouts (`--format`): each reader lists a folder's clips with their references. */
import { UsageError } from '../../cli/args.js';
import type { EvalClip } from './clip.js';
import { readLibrispeechLong } from './librispeech-long.js';
import { readLongSpeech } from './longspeech.js';
import { readPrimock57 } from './primock57.js';
import { listClips } from './wav-txt.js';

export type { EvalClip } from './clip.js';
export { listClips } from './wav-txt.js';

export const FORMATS = ['wav-txt', 'librispeech-long', 'longspeech', 'primock57'] as const;
export type DataFormat = (typeof FORMATS)[number];

export function parseFormat(s: string): DataFormat {
  if (!(FORMATS as readonly string[]).includes(s))
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, got "${s}"`);
  return s as DataFormat;
}

export type ClipReader = (dir: string, warn: (s: string) => void) => Promise<EvalClip[]>;

export const READERS: Record<DataFormat, ClipReader> = {
  'wav-txt': listClips,
  'librispeech-long': readLibrispeechLong,
  longspeech: readLongSpeech,
  primock57: readPrimock57,
};

/** The clips of DIR as its --format lays them out. */
export function readClips(dir: string, format: DataFormat, warn: (s: string) => void): Promise<EvalClip[]> {
  return READERS[format](dir, warn);
}

/** A clip's audio at 16 kHz mono: with several files (one per speaker), their average, the shorter padded with silence. */
export async function clipAudio(
  clip: EvalClip,
  io: { readFile: (path: string) => Promise<Uint8Array>; decode: (bytes: Uint8Array) => Promise<Float32Array> },
): Promise<Float32Array> {
  if (typeof clip.wav === 'string') return io.decode(await io.readFile(clip.wav));
  const parts: Float32Array[] = [];
  for (const f of clip.wav) parts.push(await io.decode(await io.readFile(f)));
  const out = new Float32Array(Math.max(...parts.map((p) => p.length)));
  for (const p of parts) for (let i = 0; i < p.length; i++) out[i] += p[i] / parts.length;
  return out;
}
