/** Clips of the project's calibration-data/, as a page on the dev server reads them (audio fetched when its turn comes). */
import type { CalibrationClip } from '../../src/index.js';

export async function siteClips(ids: string[]): Promise<CalibrationClip[]> {
  return Promise.all(
    ids.map(async (id) => {
      const meta = (await (await fetch(`/calibration-data/${id}.json`)).json()) as Pick<
        CalibrationClip,
        'text' | 'words'
      >;
      return { id, text: meta.text, words: meta.words, audio: `/calibration-data/${id}.wav` };
    }),
  );
}
