import { describe, expect, it } from 'vitest';
import { wordsFromFocus } from '../../src/transcribe/timing.js';
import { subtitleCues } from '../../src/transcribe/subtitles.js';

const TPS = 12.5;

/** Pieces dated at the given seconds, as the anchors' focus (token units) gives them. */
function spoken(pieces: [string, number][], audioSeconds: number) {
  const tok = { pieceText: (id: number) => pieces[id][0] };
  const tokens = pieces.map((_, i) => i);
  const focus = pieces.map(([, s]) => (s < 0 ? -1 : s * TPS));
  return wordsFromFocus(tokens, focus, tok, TPS, audioSeconds);
}

// "we went out", a second of silence, "then it rained on us".
const PIECES: [string, number][] = [
  [' we', 0.3],
  [' went', 0.6],
  [' out', 0.9],
  [' then', 2.2],
  [' it', 2.5],
  [' rain', 2.7],
  ['ed', 2.9],
  [' on', 3.2],
  [' us', 3.5],
];

describe('word times from the anchors focus', () => {
  it('ends a word one piece after its last piece, never past the next word or the audio', () => {
    expect(spoken(PIECES, 3.6)).toEqual([
      { word: 'we', start: 0.3, end: 0.54 },
      { word: 'went', start: 0.6, end: 0.84 },
      { word: 'out', start: 0.9, end: 1.14 },
      { word: 'then', start: 2.2, end: 2.44 },
      { word: 'it', start: 2.5, end: 2.7 },
      { word: 'rained', start: 2.7, end: 3.14 },
      { word: 'on', start: 3.2, end: 3.44 },
      { word: 'us', start: 3.5, end: 3.6 },
    ]);
  });

  it('dates pieces without a focus between their neighbours', () => {
    const w = spoken(
      [
        [' a', 1],
        [' b', -1],
        [' c', 2],
      ],
      3,
    );
    expect(w.map((x) => x.start)).toEqual([1, 1.5, 2]);
  });

  it('leaves the silence between words as a gap that subtitles cut at', () => {
    const words = spoken(PIECES, 4);
    expect(words[3].start - words[2].end).toBeGreaterThanOrEqual(0.5);
    const cues = subtitleCues(words);
    expect(cues.map((c) => c.lines.join(' '))).toEqual(['we went out', 'then it rained on us']);
    // Spoken without the silence, the same words fit one cue and are not cut.
    const close = spoken(
      PIECES.map(([p, s]) => [p, s > 2 ? s - 1 : s]),
      3,
    );
    expect(subtitleCues(close).map((c) => c.lines.join(' '))).toEqual(['we went out then it rained on us']);
  });
});
