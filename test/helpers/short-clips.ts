/** Short speech clips for tests that run many recordings: the first seconds of the calibration clips, as WAV files. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeWav, parseWav } from '../../src/audio/wav.js';

/** Writes `count` clips of `seconds` each into `dir` as clip1.wav ... and returns their paths. */
export function writeShortClips(dir: string, count: number, seconds: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    const source = join('calibration-data', `calib${String(i + 1).padStart(3, '0')}.wav`);
    const wav = parseWav(readFileSync(source));
    const n = Math.round(seconds * wav.sampleRate);
    const path = join(dir, `clip${i + 1}.wav`);
    writeFileSync(
      path,
      encodeWav(
        wav.channels.map((c) => c.slice(0, n)),
        wav.sampleRate,
      ),
    );
    return path;
  });
}

/** One recording of the first `count` calibration clips end to end (about 11 s each), written as `name` in `dir`. */
export function writeJoinedClips(dir: string, name: string, count: number): string {
  const parts = Array.from({ length: count }, (_, i) =>
    parseWav(readFileSync(join('calibration-data', `calib${String(i + 1).padStart(3, '0')}.wav`))),
  );
  const joined = new Float32Array(parts.reduce((n, p) => n + p.channels[0].length, 0));
  let at = 0;
  for (const p of parts) {
    joined.set(p.channels[0], at);
    at += p.channels[0].length;
  }
  const path = join(dir, name);
  writeFileSync(path, encodeWav([joined], parts[0].sampleRate));
  return path;
}
