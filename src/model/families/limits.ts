/**
 * The audio lengths a family's model card states (HfFamily.statedLimits), held against a
 * recording: the memory bench marks its rows with them and a transcription past one carries
 * a warning, since the model's positions may hold far more than it was trained to use.
 */
import type { HfFamily, StatedLimit } from './types.js';

/** "past the stated 30 min transcription limit" where `minutes` passes any limit, else undefined. */
export function pastStated(stated: readonly StatedLimit[], minutes: number): string | undefined {
  const past = stated.filter((s) => minutes > s.minutes);
  if (!past.length) return undefined;
  return `past the stated ${past.map((s) => `${s.minutes} min ${s.task}`).join(' and ')} limit${past.length > 1 ? 's' : ''}`;
}

/** The warning for a recording of `seconds` past a limit `family` states (none without a family or under every limit). */
export function statedLimitWarnings(family: HfFamily | undefined, seconds: number): string[] {
  const minutes = seconds / 60;
  const past = pastStated(family?.statedLimits ?? [], minutes);
  if (!family || !past) return [];
  return [
    `the recording (${minutes.toFixed(1)} min) is ${past} of ${family.example}: the transcript may degrade or stop early; ` +
      `split the recording into parts of at most ${Math.min(...family.statedLimits!.map((s) => s.minutes))} min for the best result`,
  ];
}
