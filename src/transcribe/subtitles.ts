/**
 * Subtitles from a transcription's dated words: cues cut by the usual broadcast rules
 * (at most 2 lines of 42 characters, shown 1 to 7 s, cut at sentence ends and pauses), and
 * their SRT and WebVTT text. The word times come from the anchor heads' attention
 * (timing.ts), so they are estimates: anything they get wrong (equal or backward times) is
 * clamped rather than trusted, and the output stays a valid file whatever the input.
 */
import { WnwError } from '../errors.js';
import type { TranscriptionResult, Word } from '../types.js';

export interface SubtitleCue {
  /** Seconds from the start of the audio, whole milliseconds. */
  start: number;
  /** Always after `start`, and never after the next cue's start. */
  end: number;
  /** One or more lines (2 at most with the default options), never empty. */
  lines: string[];
}

export interface SubtitleOptions {
  /** Characters per line (42); a single word longer than this gets a line of its own. */
  maxLineLength?: number;
  /** Lines per cue (2). */
  maxLines?: number;
  /** Seconds a cue is shown at least, where the next cue leaves room (1). */
  minDuration?: number;
  /** Seconds a cue is shown at most (7). */
  maxDuration?: number;
  /** A silence between two words at least this long (seconds) is a place to cut a cue (0.5). */
  pauseGap?: number;
}

// A closing quote or bracket may follow the punctuation that ends a sentence or clause.
const SENTENCE_END = /[.?!…。？！][»"'”’)\]]*$/u;
const CLAUSE_END = /[,;:—–，、；：][»"'”’)\]]*$/u;

// Costs of a cut (cue or line) by where it falls; a cue costs 1, so a cut mid-sentence
// is worth an extra cue or two to avoid, while short sentences may still share a cue.
const CUT_MID_SENTENCE = 2.5;
const CUT_AT_CLAUSE = 1.5;
const PAUSE_INSIDE_CUE = 2;
const SHORT_CUE = 3;
const EMPTY_ROOM = 0.5;

interface Timed {
  text: string;
  start: number;
  end: number;
}

/**
 * Cuts the words into cues, in time order and never overlapping. Among the ways to cut that
 * keep every cue within its lines and 7 s, the one chosen has the fewest cues and cuts at
 * sentence ends, pauses and clause ends before anywhere else, and does not leave a cue too
 * short to read where the words could give it longer.
 */
export function subtitleCues(words: readonly Word[], opts: SubtitleOptions = {}): SubtitleCue[] {
  const maxLen = opts.maxLineLength ?? 42;
  const maxLines = opts.maxLines ?? 2;
  const minDur = opts.minDuration ?? 1;
  const maxDur = opts.maxDuration ?? 7;
  const pause = opts.pauseGap ?? 0.5;
  if (!(maxLen >= 1 && maxLines >= 1 && maxDur > 0 && minDur >= 0))
    throw new RangeError('subtitle options: maxLineLength and maxLines at least 1, maxDuration above 0');
  const w = monotonic(words);
  const n = w.length;
  if (n === 0) return [];

  const gapAfter = (i: number) => (i + 1 < n ? w[i + 1].start - w[i].end : Infinity);
  const cutCost = (i: number) => {
    if (i === n - 1 || gapAfter(i) >= pause || SENTENCE_END.test(w[i].text)) return 0;
    return CLAUSE_END.test(w[i].text) ? CUT_AT_CLAUSE : CUT_MID_SENTENCE;
  };
  // best[j]: the cheapest cutting of the first j words; from[j]: where its last cue starts.
  const best = new Float64Array(n + 1).fill(Infinity);
  const from = new Int32Array(n + 1);
  best[0] = 0;
  for (let i = 0; i < n; i++) {
    if (best[i] === Infinity) continue;
    let lines = 0;
    let open = 0; // length of the line being filled, 0 when none is open
    let chars = 0;
    let pausesInside = 0;
    for (let j = i; j < n; j++) {
      const len = w[j].text.length;
      // Greedy filling gives the fewest lines, so it decides whether the words fit.
      if (len > maxLen) {
        lines += open > 0 ? 2 : 1;
        open = 0;
      } else if (open === 0) open = len;
      else if (open + 1 + len <= maxLen) open += 1 + len;
      else {
        lines++;
        open = len;
      }
      chars += (j > i ? 1 : 0) + len;
      const single = j === i;
      if (!single && (lines + (open > 0 ? 1 : 0) > maxLines || w[j].end - w[i].start > maxDur)) break;
      if (j > i && gapAfter(j - 1) >= pause) pausesInside++;
      const room = Math.min(j + 1 < n ? w[j + 1].start : Infinity, w[i].start + minDur) - w[i].start;
      const shortBy = minDur > 0 ? Math.max(0, 1 - room / minDur) : 0;
      const fill = Math.min(1, chars / (maxLen * maxLines));
      const cost =
        best[i] + 1 + cutCost(j) + PAUSE_INSIDE_CUE * pausesInside + SHORT_CUE * shortBy + EMPTY_ROOM * (1 - fill) ** 2;
      if (cost < best[j + 1]) {
        best[j + 1] = cost;
        from[j + 1] = i;
      }
    }
  }
  const spans: [number, number][] = [];
  for (let j = n; j > 0; j = from[j]) spans.push([from[j], j]);
  spans.reverse();

  // Times in whole milliseconds, so that what the files print is what these cues say.
  const ms = (t: number) => Math.round(t * 1000);
  const minMs = ms(minDur);
  const maxMs = Math.max(1, ms(maxDur));
  const cues: SubtitleCue[] = [];
  let prevEnd = 0;
  for (const [i, j] of spans) {
    const start = Math.max(ms(w[i].start), prevEnd);
    const next = j < n ? ms(w[j].start) : Infinity;
    let end = Math.max(ms(w[j - 1].end), Math.min(start + minMs, next));
    end = Math.min(end, start + maxMs);
    // Words dated all at one instant leave no room at all: a millisecond keeps the cue valid.
    if (end <= start) end = start + 1;
    cues.push({ start: start / 1000, end: end / 1000, lines: breakLines(w.slice(i, j), maxLen, maxLines) });
    prevEnd = end;
  }
  return cues;
}

/**
 * The words' text with whitespace made single spaces (a line break inside a word would end an
 * SRT cue), empty words left out, and times made usable: starts never go back, and a word ends
 * between its start and the next word's start.
 */
function monotonic(words: readonly Word[]): Timed[] {
  const out: Timed[] = [];
  let at = 0;
  for (const word of words) {
    const text = String(word.word).replace(/\s+/gu, ' ').trim();
    if (!text) continue;
    const start = Number.isFinite(word.start) ? Math.max(at, word.start) : at;
    const end = Number.isFinite(word.end) ? Math.max(start, word.end) : start;
    out.push({ text, start, end });
    at = start;
  }
  for (let i = 0; i + 1 < out.length; i++) out[i].end = Math.min(out[i].end, out[i + 1].start);
  return out;
}

/**
 * A cue's words on the fewest lines that hold them, as even in length as can be, with a
 * line preferably ending where a sentence or clause does when that costs little evenness.
 */
function breakLines(words: readonly Timed[], maxLen: number, maxLines: number): string[] {
  const k = words.length;
  const text = (a: number, b: number) =>
    words
      .slice(a, b)
      .map((x) => x.text)
      .join(' ');
  const prefix = [0];
  for (const x of words) prefix.push(prefix[prefix.length - 1] + x.text.length);
  const length = (a: number, b: number) => prefix[b] - prefix[a] + (b - a - 1);
  if (length(0, k) <= maxLen || k === 1) return [text(0, k)];
  // Squared lengths reward even lines; the bonuses let punctuation win over a few characters.
  const lineCost = (a: number, b: number) => {
    const len = length(a, b);
    if (len > maxLen && b - a > 1) return Infinity;
    const last = words[b - 1].text;
    const bonus = b === k ? 0 : SENTENCE_END.test(last) ? 50 : CLAUSE_END.test(last) ? 18 : 0;
    return len ** 2 - bonus;
  };
  for (let count = 2; count <= Math.max(maxLines, k); count++) {
    // cost[l][b]: the first b words on l lines.
    const cost = Array.from({ length: count + 1 }, () => new Array<number>(k + 1).fill(Infinity));
    const back = Array.from({ length: count + 1 }, () => new Array<number>(k + 1).fill(0));
    cost[0][0] = 0;
    for (let l = 1; l <= count; l++)
      for (let b = l; b <= k; b++)
        for (let a = l - 1; a < b; a++) {
          if (cost[l - 1][a] === Infinity) continue;
          const c = cost[l - 1][a] + lineCost(a, b);
          if (c < cost[l][b]) {
            cost[l][b] = c;
            back[l][b] = a;
          }
        }
    if (cost[count][k] === Infinity) continue;
    const lines: string[] = [];
    for (let l = count, b = k; l > 0; b = back[l][b], l--) lines.push(text(back[l][b], b));
    return lines.reverse();
  }
  return words.map((x) => x.text);
}

/** The formats a recording's subtitles come in; anything else is a BAD_ARGUMENT. */
export function checkSubtitleFormat(format: unknown): asserts format is 'srt' | 'vtt' {
  if (format !== 'srt' && format !== 'vtt')
    throw new WnwError('BAD_ARGUMENT', `subtitles come as "srt" or "vtt", got ${JSON.stringify(format)}`);
}

/**
 * Whether a subtitles call names the result it cuts from (Recording.subtitles), rather than
 * the options of a transcription to run: a result has its tokens and dated words.
 */
export function isTranscriptionResult(from: unknown): from is TranscriptionResult {
  const r = from as Partial<TranscriptionResult> | null;
  return typeof r === 'object' && r !== null && Array.isArray(r.words) && Array.isArray(r.tokens);
}

/** A result's dated words as SRT or WebVTT. */
export function subtitlesOf(format: 'srt' | 'vtt', result: Pick<TranscriptionResult, 'words'>): string {
  const cues = subtitleCues(result.words);
  return format === 'srt' ? toSrt(cues) : toVtt(cues);
}

/** SRT: numbered cues, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, each followed by a blank line; '' for no cues. */
export function toSrt(cues: readonly SubtitleCue[]): string {
  return printable(cues)
    .map((c, i) => `${i + 1}\n${timestamp(c.startMs, ',')} --> ${timestamp(c.endMs, ',')}\n${c.lines.join('\n')}\n\n`)
    .join('');
}

/** WebVTT: the `WEBVTT` header, then cues timed `HH:MM:SS.mmm --> HH:MM:SS.mmm`; `WEBVTT\n` for no cues. */
export function toVtt(cues: readonly SubtitleCue[]): string {
  const body = printable(cues)
    .map((c) => `${timestamp(c.startMs, '.')} --> ${timestamp(c.endMs, '.')}\n${c.lines.map(escapeVtt).join('\n')}\n\n`)
    .join('');
  return body ? `WEBVTT\n\n${body}` : 'WEBVTT\n';
}

/**
 * Cues as both formats need them, whoever built them: whole milliseconds with the end after
 * the start (rounding alone could make them equal), and no line that is empty or holds a line
 * break, since a blank line ends a cue in both formats. A cue left with no text is dropped.
 */
function printable(cues: readonly SubtitleCue[]): { startMs: number; endMs: number; lines: string[] }[] {
  const out: { startMs: number; endMs: number; lines: string[] }[] = [];
  for (const c of cues) {
    const lines = c.lines.map((l) => l.replace(/\s+/gu, ' ').trim()).filter((l) => l.length > 0);
    if (!lines.length) continue;
    const startMs = Math.max(0, Math.round((Number.isFinite(c.start) ? c.start : 0) * 1000));
    const endMs = Math.max(startMs + 1, Math.round((Number.isFinite(c.end) ? c.end : 0) * 1000));
    out.push({ startMs, endMs, lines });
  }
  return out;
}

/** HH:MM:SS plus the milliseconds after `sep`: ',' in SRT, '.' in WebVTT. */
function timestamp(ms: number, sep: ',' | '.'): string {
  const pad = (v: number, width: number) => String(v).padStart(width, '0');
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}${sep}${pad(ms % 1000, 3)}`;
}

// WebVTT cue text is markup: "<" opens a tag and "&" a character reference, and ">" escaped
// keeps a "-->" in the words from reading as a timing line.
function escapeVtt(line: string): string {
  return line.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
