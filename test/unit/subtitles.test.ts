import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { subtitleCues, toSrt, toVtt, type SubtitleCue } from '../../src/transcribe/subtitles.js';
import type { Word } from '../../src/types.js';
import { runCliCaptured } from '../helpers/cli.js';

interface ParsedCue {
  start: number;
  end: number;
  lines: string[];
}

const seconds = (h: string, m: string, s: string, ms: string) => +h * 3600 + +m * 60 + +s + +ms / 1000;

/** SRT as players read it: blocks split by a blank line, each a number counting from 1, a timing line and text. */
function parseSrt(srt: string): ParsedCue[] {
  if (srt === '') return [];
  expect(srt.endsWith('\n\n')).toBe(true);
  const time = /^(\d{2}):([0-5]\d):([0-5]\d),(\d{3}) --> (\d{2}):([0-5]\d):([0-5]\d),(\d{3})$/;
  return srt
    .slice(0, -2)
    .split('\n\n')
    .map((block, i) => {
      const [num, timing, ...lines] = block.split('\n');
      expect(num).toBe(String(i + 1));
      const m = time.exec(timing);
      expect(m, `cue ${i + 1} timing "${timing}"`).not.toBeNull();
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) expect(l.trim()).not.toBe('');
      return { start: seconds(m![1], m![2], m![3], m![4]), end: seconds(m![5], m![6], m![7], m![8]), lines };
    });
}

/**
 * WebVTT after the W3C spec's file structure: the "WEBVTT" line, a blank line, then cues of an
 * optional identifier, `HH:MM:SS.mmm --> HH:MM:SS.mmm` (hours two or more digits) and text,
 * whose character references are decoded.
 */
function parseVtt(vtt: string): ParsedCue[] {
  expect(vtt.startsWith('WEBVTT\n')).toBe(true);
  const rest = vtt.slice('WEBVTT\n'.length);
  if (rest === '') return [];
  expect(rest.startsWith('\n')).toBe(true);
  expect(vtt.endsWith('\n\n')).toBe(true);
  const time = /^(\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3}) --> (\d{2,}):([0-5]\d):([0-5]\d)\.(\d{3})$/;
  return rest
    .slice(1, -2)
    .split('\n\n')
    .map((block) => {
      const all = block.split('\n');
      const at = all.findIndex((l) => l.includes('-->'));
      expect(at === 0 || at === 1).toBe(true);
      const m = time.exec(all[at]);
      expect(m, `timing "${all[at]}"`).not.toBeNull();
      const lines = all.slice(at + 1);
      expect(lines.length).toBeGreaterThan(0);
      for (const l of lines) {
        expect(l).not.toContain('-->');
        expect(l).not.toMatch(/<|&(?!amp;|lt;|gt;)/);
      }
      return {
        start: seconds(m![1], m![2], m![3], m![4]),
        end: seconds(m![5], m![6], m![7], m![8]),
        lines: lines.map((l) => l.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')),
      };
    });
}

/** The rules every output keeps, checked on both files as parsed back. */
function checkSubtitles(words: Word[]): SubtitleCue[] {
  const cues = subtitleCues(words);
  const srt = toSrt(cues);
  const vtt = toVtt(cues);
  for (const file of [srt, vtt]) {
    expect(file.charCodeAt(0)).not.toBe(0xfeff);
    expect(file).not.toContain('\r');
  }
  const fromSrt = parseSrt(srt);
  const fromVtt = parseVtt(vtt);
  expect(fromSrt).toEqual(fromVtt);
  expect(fromSrt.length).toBe(cues.length);
  fromSrt.forEach((c, i) => {
    expect(c.start).toBeCloseTo(cues[i].start, 6);
    expect(c.end).toBeCloseTo(cues[i].end, 6);
    expect(c.lines).toEqual(cues[i].lines);
  });
  const ms = (t: number) => Math.round(t * 1000);
  fromSrt.forEach((c, i) => {
    expect(ms(c.end)).toBeGreaterThan(ms(c.start));
    expect(c.end - c.start).toBeLessThanOrEqual(7 + 1e-9);
    expect(c.lines.length).toBeLessThanOrEqual(2);
    for (const l of c.lines) if (l.length > 42) expect(l).not.toContain(' ');
    const next = fromSrt[i + 1];
    if (next) {
      expect(ms(next.start)).toBeGreaterThanOrEqual(ms(c.end));
      // Shorter than a second only where the next cue leaves no more room.
      if (c.end - c.start < 1 - 1e-9) expect(ms(c.end)).toBe(ms(next.start));
    } else expect(c.end - c.start).toBeGreaterThanOrEqual(1 - 1e-9);
  });
  const text = words
    .map((w) => w.word)
    .filter((w) => w !== '')
    .join(' ');
  expect(fromSrt.map((c) => c.lines.join(' ')).join(' ')).toBe(text);
  return cues;
}

/** A small deterministic generator, so every run tests the same words. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const letters = 'abcdefghijklmnopqrstuvwxyz';
function randomWord(r: () => number, min: number, max: number): string {
  const n = min + Math.floor(r() * (max - min + 1));
  let w = '';
  for (let i = 0; i < n; i++) w += letters[Math.floor(r() * 26)];
  return w;
}

/** Words one after the other: each ends where the next starts, or `pauses(i)` seconds before it. */
function dated(texts: string[], secondsPerWord: number, pauses: (i: number) => number = () => 0): Word[] {
  let t = 0;
  return texts.map((word, i) => {
    const start = t;
    t += secondsPerWord;
    const w = { word, start, end: t };
    t += pauses(i);
    return w;
  });
}

const endsSentence = (w: string) => /[.?!]$/.test(w);

describe('subtitleCues and the SRT and WebVTT files', () => {
  it('prints one small case exactly, in both formats', () => {
    const at = 3723.25; // 1 h 2 min 3.25 s in: every field of the timestamp is used
    const words: Word[] = [
      ['Hello', 0, 0.4],
      ['world.', 0.45, 0.9],
      ['This', 2, 2.2],
      ['is', 2.2, 2.3],
      ['a', 2.3, 2.4],
      ['test', 2.4, 2.8],
      ['of', 2.8, 2.9],
      ['the', 2.9, 3],
      ['subtitles', 3, 3.6],
      ['and', 3.6, 3.8],
      ['it', 3.8, 3.9],
      ['keeps', 3.9, 4.2],
      ['going', 4.2, 4.5],
      ['on', 4.5, 4.6],
      ['for', 4.6, 4.8],
      ['a', 4.8, 4.9],
      ['while.', 4.9, 5.4],
    ].map(([word, start, end]) => ({ word: word as string, start: at + (start as number), end: at + (end as number) }));
    checkSubtitles(words);
    const cues = subtitleCues(words);
    expect(toSrt(cues)).toBe(
      '1\n01:02:03,250 --> 01:02:04,250\nHello world.\n\n' +
        '2\n01:02:05,250 --> 01:02:08,650\nThis is a test of the subtitles\nand it keeps going on for a while.\n\n',
    );
    expect(toVtt(cues)).toBe(
      'WEBVTT\n\n' +
        '01:02:03.250 --> 01:02:04.250\nHello world.\n\n' +
        '01:02:05.250 --> 01:02:08.650\nThis is a test of the subtitles\nand it keeps going on for a while.\n\n',
    );
  });

  it('no words: no cues, an empty SRT and a WebVTT of its header alone', () => {
    expect(subtitleCues([])).toEqual([]);
    expect(toSrt([])).toBe('');
    expect(toVtt([])).toBe('WEBVTT\n');
    expect(subtitleCues([{ word: '', start: 1, end: 2 }])).toEqual([]);
    expect(parseVtt(toVtt([]))).toEqual([]);
  });

  it('a long run of short words: full, balanced cues of 2 lines of 42 characters at most', () => {
    const r = rng(1);
    const words = dated(
      Array.from({ length: 2000 }, () => randomWord(r, 1, 4)),
      0.12,
    );
    const cues = checkSubtitles(words);
    for (const c of cues) {
      if (c.lines.length === 2) {
        const longest = Math.max(
          ...c.lines
            .join(' ')
            .split(' ')
            .map((w) => w.length),
        );
        expect(Math.abs(c.lines[0].length - c.lines[1].length)).toBeLessThanOrEqual(longest + 1);
      }
    }
    // 42-character lines of words of 2.5 letters on average hold about 12 words: cues are not left half empty.
    const chars = cues.reduce((n, c) => n + c.lines.join(' ').length, 0);
    expect(chars / cues.length).toBeGreaterThan(50);
  });

  it('a word longer than a line stays whole on a line of its own', () => {
    const r = rng(2);
    const texts = Array.from({ length: 300 }, (_, i) => (i % 7 === 3 ? randomWord(r, 43, 80) : randomWord(r, 2, 9)));
    const cues = checkSubtitles(dated(texts, 0.4));
    const long = cues.flatMap((c) => c.lines).filter((l) => l.length > 42);
    expect(long.length).toBe(texts.filter((t) => t.length > 42).length);
    // Alone, the longest word there is still a cue.
    checkSubtitles([{ word: 'x'.repeat(120), start: 0, end: 0.5 }]);
  });

  it('cuts at sentence ends when the sentences fit a cue', () => {
    const r = rng(3);
    const texts: string[] = [];
    while (texts.length < 600) {
      const n = 4 + Math.floor(r() * 6);
      for (let i = 0; i < n; i++) texts.push(randomWord(r, 2, 7) + (i === n - 1 ? '.?!'[Math.floor(r() * 3)] : ''));
    }
    const cues = checkSubtitles(dated(texts, 0.3));
    for (const c of cues) expect(endsSentence(c.lines[c.lines.length - 1])).toBe(true);
    // A sentence too long for one cue is still cut where one ends, never mid-way between two.
    const long = dated(
      Array.from({ length: 40 }, (_, i) => (i === 29 ? 'end.' : 'word')),
      0.2,
    );
    expect(checkSubtitles(long).some((c) => c.lines.at(-1)!.endsWith('end.'))).toBe(true);
  });

  it('cuts at pauses of half a second or more, and the gap is an option', () => {
    const r = rng(4);
    const texts = Array.from({ length: 500 }, () => randomWord(r, 2, 7));
    const pauseAfter = (i: number) => i % 6 === 5;
    const words = dated(texts, 0.3, (i) => (pauseAfter(i) ? 0.8 : 0.05));
    const cues = checkSubtitles(words);
    let w = 0;
    for (const c of cues) {
      w += c.lines.join(' ').split(' ').length;
      expect(w === words.length || pauseAfter(w - 1)).toBe(true);
    }
    // With a gap of a second asked for, these pauses no longer cut: fewer, fuller cues.
    expect(subtitleCues(words, { pauseGap: 1 }).length).toBeLessThan(cues.length);
  });

  it('stays within 1 to 7 s: slow words are split, a short cue runs toward a second without reaching the next', () => {
    const slow = checkSubtitles(dated(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'], 1.5));
    expect(slow.length).toBeGreaterThan(1);
    const quick = checkSubtitles([
      { word: 'Yes.', start: 0, end: 0.2 },
      { word: 'No.', start: 0.8, end: 1 },
      { word: 'Maybe', start: 5, end: 5.3 },
    ]);
    expect(quick.map((c) => [c.start, c.end])).toEqual([
      [0, 1],
      [5, 6],
    ]);
    // Sentences that fill cues and follow each other with no room: a short cue ends at the next.
    const crowded = checkSubtitles([
      { word: 'x'.repeat(40) + '.', start: 0, end: 0.3 },
      { word: 'y'.repeat(40) + '.', start: 0.3, end: 0.6 },
      { word: 'z'.repeat(40) + '.', start: 0.6, end: 0.9 },
    ]);
    expect(crowded.length).toBeGreaterThan(1);
    // One word said for 10 s cannot be split: its cue is held 7 s.
    const held = checkSubtitles([{ word: 'ooooh', start: 2, end: 12 }]);
    expect(held).toEqual([{ start: 2, end: 9, lines: ['ooooh'] }]);
  });

  it('30 minutes of speech', () => {
    const r = rng(5);
    const texts: string[] = [];
    const pauses = new Set<number>();
    while (texts.length < 30 * 60 * 2.5) {
      const n = 3 + Math.floor(r() * 25);
      for (let i = 0; i < n; i++) texts.push(randomWord(r, 1, 10) + (i === n - 1 ? '.' : i % 7 === 6 ? ',' : ''));
      if (r() < 0.3) pauses.add(texts.length - 1);
    }
    const words = dated(texts, 0.38, (i) => (pauses.has(i) ? 0.6 + r() : 0.02));
    const cues = checkSubtitles(words);
    expect(words.at(-1)!.end).toBeGreaterThan(30 * 60);
    expect(toSrt(cues)).toMatch(/\n00:(29|3\d):\d\d,\d{3} --> 00:(3\d):\d\d,\d{3}\n/);
    const durations = cues.map((c) => c.end - c.start);
    expect(Math.min(...durations)).toBeGreaterThanOrEqual(1 - 1e-9);
  });

  it('equal, backward and missing times are clamped to run forward, and the files stay valid', () => {
    const r = rng(6);
    const texts = Array.from({ length: 200 }, () => randomWord(r, 1, 8));
    // All said at one instant: the cues still follow one another.
    checkSubtitles(texts.map((word) => ({ word, start: 5, end: 5 })));
    // Times in no order at all, ends before starts.
    const shuffled = checkSubtitles(texts.map((word) => ({ word, start: r() * 60, end: r() * 60 })));
    for (let i = 1; i < shuffled.length; i++) expect(shuffled[i].start).toBeGreaterThanOrEqual(shuffled[i - 1].end);
    checkSubtitles([
      { word: 'one', start: 2, end: 1 },
      { word: 'two', start: 1, end: 1 },
      { word: 'three', start: NaN, end: NaN },
      { word: 'four', start: 3, end: 3 },
    ]);
  });

  it('WebVTT escapes what its cue text would read as markup; SRT keeps the words as they are', () => {
    const words = dated(['a<b', 'R&D', '-->', 'x>y'], 0.5);
    checkSubtitles(words);
    const cues = subtitleCues(words);
    expect(toVtt(cues)).toContain('\na&lt;b R&amp;D --&gt; x&gt;y\n');
    expect(toSrt(cues)).toContain('\na<b R&D --> x>y\n');
  });

  it('rounding to milliseconds never puts an end at or before its start', () => {
    const cue = (start: number, end: number): SubtitleCue => ({ start, end, lines: ['hi'] });
    expect(toSrt([cue(1.0004, 1.0004)])).toBe('1\n00:00:01,000 --> 00:00:01,001\nhi\n\n');
    expect(toVtt([cue(0.9995, 1.0004)])).toBe('WEBVTT\n\n00:00:01.000 --> 00:00:01.001\nhi\n\n');
    expect(toSrt([cue(59.9996, 61)])).toBe('1\n00:01:00,000 --> 00:01:01,000\nhi\n\n');
    // A line break inside a line would end the cue early: it becomes a space.
    expect(toSrt([{ start: 0, end: 1, lines: ['a\n\nb', ' '] }])).toBe('1\n00:00:00,000 --> 00:00:01,000\na b\n\n');
  });
});

describe("ffmpeg's subtitle demuxers read the files as we mean them", () => {
  // An independent reader: ffmpeg (a package the test command installs) parses each file and
  // writes it out again as SRT; its cues must be ours, time for time and line for line.
  const remux = (file: string): string => {
    const r = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'srt', '-'], { encoding: 'utf8' });
    expect(r.error, 'ffmpeg is needed (scripts/system-packages.sh installs it)').toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    // ffmpeg ends the lines inside a cue with CRLF, which SRT allows.
    return r.stdout.replace(/\r\n/g, '\n');
  };
  it('SRT and WebVTT, with sentence cuts, two-line cues, markup characters and times past an hour', () => {
    const r = rng(11);
    const texts = Array.from({ length: 400 }, (_, i) => randomWord(r, 1, 12) + (i % 11 === 10 ? '.' : ''));
    texts[5] = 'a<b&c>d';
    const words = dated(texts, 0.35, (i) => (i === 200 ? 3600 : i % 17 === 16 ? 0.7 : 0));
    const cues = subtitleCues(words);
    expect(cues.some((c) => c.lines.length === 2)).toBe(true);
    expect(cues.at(-1)!.end).toBeGreaterThan(3600);
    const dir = mkdtempSync(join(tmpdir(), 'wnw-subs-'));
    const ours = parseSrt(toSrt(cues));
    for (const [name, text] of [
      ['cues.srt', toSrt(cues)],
      ['cues.vtt', toVtt(cues)],
    ]) {
      writeFileSync(join(dir, name), text);
      expect(parseSrt(remux(join(dir, name))), name).toEqual(ours);
    }
  });
});

describe('wnw transcribe --format', () => {
  const clip = join(process.cwd(), 'public', 'models', 'wnw-ref', 'fixtures', 'clip1.wav');

  it('srt and vtt print the subtitles of the dated words on stdout', async () => {
    const json = await runCliCaptured(['transcribe', clip, '--backend', 'cpu', '--policy', 'full', '--json']);
    expect(json.code, json.err).toBe(0);
    const { text, words } = JSON.parse(json.out) as { text: string; words: Word[] };
    expect(words.length).toBeGreaterThan(0);
    const srt = await runCliCaptured(['transcribe', clip, '--backend', 'cpu', '--policy', 'full', '--format', 'srt']);
    expect(srt.code, srt.err).toBe(0);
    const fromSrt = parseSrt(srt.out);
    expect(fromSrt.length).toBeGreaterThan(0);
    expect(fromSrt.map((c) => c.lines.join(' ')).join(' ')).toBe(words.map((w) => w.word).join(' '));
    const vtt = await runCliCaptured(['transcribe', clip, '--backend', 'cpu', '--policy', 'full', '--format=vtt']);
    expect(vtt.code, vtt.err).toBe(0);
    expect(parseVtt(vtt.out)).toEqual(fromSrt);
    expect(srt.out).toBe(toSrt(subtitleCues(words)));
    expect(text.length).toBeGreaterThan(0);
  });

  it('a bad --format, or --json beside another format, is a usage error', async () => {
    for (const [argv, pattern] of [
      [['--format', 'ass'], /--format must be one of txt, json, srt, vtt, got "ass"/],
      [['--format', 'srt', '--json'], /--json is --format json: it cannot go with --format srt/],
    ] as const) {
      const r = await runCliCaptured(['transcribe', clip, ...argv]);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toMatch(pattern);
      expect(r.err).toMatch(/\[--format txt\|json\|srt\|vtt\]/);
    }
  });
});
