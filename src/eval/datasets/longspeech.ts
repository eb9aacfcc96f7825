/**
 * LongSpeech (the long-speech benchmark for transcription, translation and understanding):
 * its exact release layout could not be confirmed here, so this reader takes the manifest
 * form such benchmarks ship: a `*.jsonl` (one object a line) or `*.json` (an array) in DIR,
 * each record naming its audio file relative to DIR (`audio`, `audio_path`, `wav` or `path`),
 * its transcript (`text`, `transcript` or `transcription`) and, for translation, its target
 * reference (`translation` or `target_text`); `id` is optional (the audio's name otherwise).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../../cli/args.js';
import { type EvalClip, dataFiles } from './clip.js';

const pick = (r: Record<string, unknown>, keys: string[]) => {
  for (const k of keys) if (typeof r[k] === 'string') return r[k] as string;
  return undefined;
};

export async function readLongSpeech(dir: string, warn: (s: string) => void): Promise<EvalClip[]> {
  const files = (await dataFiles(dir)).filter((f) => !f.includes('/') && /\.jsonl?$/i.test(f));
  const clips: EvalClip[] = [];
  for (const f of files) {
    const text = await readFile(join(dir, f), 'utf8');
    let records: unknown[];
    try {
      records = f.toLowerCase().endsWith('.jsonl')
        ? text
            .split('\n')
            .filter((l) => l.trim())
            .map((l) => JSON.parse(l))
        : JSON.parse(text);
    } catch (e) {
      throw new UsageError(`${f} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (!Array.isArray(records)) throw new UsageError(`${f}: expected an array of records`);
    for (const [i, rec] of records.entries()) {
      const r = (rec ?? {}) as Record<string, unknown>;
      const audio = pick(r, ['audio', 'audio_path', 'wav', 'path']);
      const reference = pick(r, ['text', 'transcript', 'transcription']);
      if (!audio || reference === undefined) {
        warn(`skipping record ${i + 1} of ${f}: no audio path or transcript`);
        continue;
      }
      const translation = pick(r, ['translation', 'target_text']);
      const id = pick(r, ['id']) ?? audio.replace(/\.[^./]+$/, '');
      clips.push({
        id,
        wav: join(dir, audio),
        reference: reference.trim(),
        ...(translation !== undefined ? { translation: translation.trim() } : {}),
      });
    }
  }
  if (!clips.length) throw new UsageError(`no LongSpeech records (a *.jsonl or *.json manifest) in ${dir}`);
  return clips;
}
