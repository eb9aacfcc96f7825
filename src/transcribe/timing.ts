/**
 * Word times from the anchor heads' attention. At the decode step that predicts a
 * token, the anchors' attention peaks where that token is spoken (that is what makes
 * them anchors), so the attention-weighted mean position of the top mass is the
 * token's time. Words start at their first piece's time and end one piece's duration after
 * their last piece, never after the next word's start nor the audio's end: a silence
 * between two words then shows as a gap, which subtitles cut at (subtitles.ts pauseGap).
 */
import type { TextTokenizer } from '../model/text/types.js';
import type { Word } from '../types.js';

/**
 * Groups tokens into words (a piece starting with "▁" opens a word) and dates them.
 * `focus[i]` is the audio position (token units) of tokens[i], or -1 when unknown: then
 * times are interpolated from the neighbours, or spread evenly over the audio.
 */
export function wordsFromFocus(
  tokens: number[],
  focus: number[],
  tok: Pick<TextTokenizer, 'pieceText'>,
  tokensPerSecond: number,
  audioSeconds: number,
): Word[] {
  const t = fillUnknown(focus, tokens.length, audioSeconds * tokensPerSecond);
  const words: { word: string; start: number; last: number }[] = [];
  let cur: { word: string; start: number; last: number } | null = null;
  for (let i = 0; i < tokens.length; i++) {
    const piece = tok.pieceText(tokens[i]);
    if (piece === '') continue;
    if (piece.startsWith(' ') || cur === null) {
      cur = { word: piece.trim(), start: t[i], last: t[i] };
      words.push(cur);
    } else {
      cur.word += piece;
      cur.last = t[i];
    }
  }
  const audioEnd = audioSeconds * tokensPerSecond;
  const pieceTokens = PIECE_SECONDS * tokensPerSecond;
  return words
    .map((w, i) => ({ ...w, end: Math.min(w.last + pieceTokens, words[i + 1]?.start ?? audioEnd, audioEnd) }))
    .filter((w) => w.word.length > 0)
    .map((w) => ({
      word: w.word,
      start: round(w.start / tokensPerSecond),
      end: round(Math.max(w.end, w.start) / tokensPerSecond),
    }));
}

/**
 * How long a word lasts after its last piece's time. Chosen on calibration clips 21-50 (the
 * eval's `--from 20`) among constants and estimates from the word's or the last piece's
 * letters: none of the letter-count estimates came out better than this constant, which
 * knows nothing of the language's spelling.
 */
const PIECE_SECONDS = 0.24;

/**
 * The words of `raw` that fall inside `inner`, a span of it (a reply wrapper taken off, see
 * reply.ts): words outside are dropped, a word the span cuts (a closing quote glued to the
 * last word) keeps only its inside part. Each word is found in `raw` in order, as its pieces
 * were decoded from it.
 */
export function wordsWithin(words: Word[], raw: string, inner: string): Word[] {
  if (inner === raw) return words;
  const start = inner ? raw.indexOf(inner) : -1;
  if (start < 0) return [];
  const end = start + inner.length;
  const out: Word[] = [];
  let at = 0;
  for (const w of words) {
    const i = raw.indexOf(w.word, at);
    if (i < 0) continue;
    at = i + w.word.length;
    const a = Math.max(i, start);
    const b = Math.min(at, end);
    if (b > a) out.push({ ...w, word: raw.slice(a, b) });
  }
  return out;
}

function fillUnknown(focus: number[], n: number, audioTokens: number): number[] {
  const t = focus.slice(0, n);
  const known = t.map((v, i) => (v >= 0 ? i : -1)).filter((i) => i >= 0);
  if (known.length === 0) return t.map((_, i) => ((i + 0.5) / Math.max(1, n)) * audioTokens);
  for (let i = 0; i < n; i++) {
    if (t[i] >= 0) continue;
    const prev = known.filter((k) => k < i).pop();
    const next = known.find((k) => k > i);
    if (prev === undefined) t[i] = t[next!];
    else if (next === undefined) t[i] = t[prev];
    else t[i] = t[prev] + ((t[next] - t[prev]) * (i - prev)) / (next - prev);
  }
  // Time runs forward: a word cannot start before the previous one.
  for (let i = 1; i < n; i++) t[i] = Math.max(t[i], t[i - 1]);
  return t;
}

const round = (x: number) => Math.round(x * 100) / 100;
