/**
 * PriMock57 (github.com/babylonhealth/primock57): `audio/dayD_consultationNN_doctor.wav`
 * and `..._patient.wav`, one speaker each, and `transcripts/dayD_consultationNN_doctor.TextGrid`
 * and `..._patient.TextGrid`, one interval per utterance (xmin, xmax, text), as that
 * repository's README and transcripts/README describe. One clip per consultation: its two
 * WAVs are averaged into one signal, and its reference is both speakers' non-empty
 * utterances in order of start time. The transcribers' tags are dropped: `<UNIN/>`
 * (unintelligible) entirely, `<UNSURE>...</UNSURE>` keeping the words inside.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../../cli/args.js';
import type { EvalClip } from './clip.js';
import { parseTextGrid, type Interval } from './textgrid.js';

const SPEAKERS = ['doctor', 'patient'] as const;

/** Both speakers' utterances merged by start time (the doctor first on a tie), tags removed. */
export function mergeUtterances(bySpeaker: Interval[][]): string {
  const all = bySpeaker.flatMap((tier, s) => tier.map((iv) => ({ ...iv, s })));
  all.sort((a, b) => a.xmin - b.xmin || a.s - b.s);
  return all
    .map((iv) =>
      iv.text
        .replace(/<UNIN\s*\/>/gi, ' ')
        .replace(/<\/?UNSURE>/gi, '')
        .replace(/\s+/g, ' ')
        .trim(),
    )
    .filter(Boolean)
    .join(' ');
}

export async function readPrimock57(dir: string, warn: (s: string) => void): Promise<EvalClip[]> {
  let names: string[];
  try {
    names = await readdir(join(dir, 'audio'));
  } catch {
    throw new UsageError(`cannot read ${join(dir, 'audio')} (PriMock57 keeps its WAVs there)`);
  }
  const ids = [
    ...new Set(names.map((n) => /^(.*)_doctor\.wav$/i.exec(n)?.[1]).filter((x): x is string => Boolean(x))),
  ].sort();
  const clips: EvalClip[] = [];
  for (const id of ids) {
    const wavs = SPEAKERS.map((s) => join(dir, 'audio', `${id}_${s}.wav`));
    if (!names.includes(`${id}_patient.wav`)) {
      warn(`skipping ${id}: no ${id}_patient.wav`);
      continue;
    }
    try {
      const tiers = await Promise.all(
        SPEAKERS.map(async (s) =>
          parseTextGrid(await readFile(join(dir, 'transcripts', `${id}_${s}.TextGrid`), 'utf8')),
        ),
      );
      clips.push({ id, wav: wavs, reference: mergeUtterances(tiers) });
    } catch {
      warn(`skipping ${id}: no transcripts/${id}_doctor.TextGrid and _patient.TextGrid`);
    }
  }
  if (!clips.length) throw new UsageError(`no PriMock57 consultations (audio/*_doctor.wav with transcripts) in ${dir}`);
  return clips;
}
