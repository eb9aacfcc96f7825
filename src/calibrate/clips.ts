/** Calibration clips: NAME.wav + NAME.json { text, words: [{ word, start, end, confidence }], tokens? }. */
import type { WordSpan } from './voice-score.js';

export interface FolderClip {
  id: string;
  wav: string;
  text: string;
  words: Array<WordSpan & { word: string }>;
  /** Token ids of the transcript, when the clip ships them (training tokenisation). */
  tokens?: number[];
}

export async function listCalibrationClips(dir: string, limit = Infinity): Promise<FolderClip[]> {
  const fs = await import('node:fs/promises');
  const path = await import('node:path');
  const files = await fs.readdir(dir);
  // a clip is a NAME.json beside a NAME.wav: other json there (manifest.json) is not a clip
  const names = files.filter((n) => n.endsWith('.json') && files.includes(`${n.slice(0, -5)}.wav`)).sort();
  const clips: FolderClip[] = [];
  for (const n of names.slice(0, limit)) {
    const id = n.slice(0, -5);
    const wav = path.join(dir, `${id}.wav`);
    const j = JSON.parse(await fs.readFile(path.join(dir, n), 'utf8')) as Omit<FolderClip, 'id' | 'wav'>;
    if (!Array.isArray(j.words) || typeof j.text !== 'string') throw new Error(`${n}: expected { text, words: [...] }`);
    clips.push({ id, wav, text: j.text, words: j.words, tokens: j.tokens });
  }
  if (clips.length === 0) throw new Error(`no calibration clips (NAME.wav + NAME.json) in ${dir}`);
  return clips;
}
