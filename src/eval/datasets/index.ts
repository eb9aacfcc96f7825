/** The eval's dataset layouts (`--format`): each reader lists a folder's clips with their references. */
import { UsageError } from '../../cli/args.js';
import type { EvalClip } from './clip.js';
import { readLibrispeechLong } from './librispeech-long.js';
import { readLongSpeech } from './longspeech.js';
import { readPrimock57 } from './primock57.js';

export type { EvalClip } from './clip.js';

export const FORMATS = ['wav-txt', 'librispeech-long', 'longspeech', 'primock57'] as const;
export type DataFormat = (typeof FORMATS)[number];

export function parseFormat(s: string): DataFormat {
  if (!(FORMATS as readonly string[]).includes(s)) throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, got "${s}"`);
  return s as DataFormat;
}

export type ClipReader = (dir: string, warn: (s: string) => void) => Promise<EvalClip[]>;

export const READERS: Record<Exclude<DataFormat, 'wav-txt'>, ClipReader> = {
  'librispeech-long': readLibrispeechLong,
  longspeech: readLongSpeech,
  primock57: readPrimock57,
};
