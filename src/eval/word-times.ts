/**
 * `npm run eval:word-times -- [--data calibration-data] [--from 0] [--limit N] [--policy full] [--budget 0.2] [--backend cpu]
 *                              [--pause-gap 0.5] [--json]`
 *
 * How far the transcript's word times (what subtitles are cut from) are from the
 * recordings' own word alignment: the calibration clips carry espeak-ng's word events
 * (`calibNNN.json` words, see calibration-data/README.md). Each clip is transcribed, its
 * words matched to the reference's by the longest common subsequence of their normalised
 * forms, and the start and end errors of the matched words pooled over the clips:
 * median and 90th percentile, in seconds. Pauses: between two matched words that follow each
 * other on both sides, a silence of at least --pause-gap (subtitles' default, 0.5 s) in the
 * reference, and a gap that long between our words (what subtitles cut at), counted as found,
 * missed and spurious.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { toMono16k } from '../audio/decode.js';
import { loadTranscriber } from '../transcribe/transcriber.js';
import { normalizeWords } from './wer.js';
import type { PolicyName, Word } from '../index.js';
import { quantile } from '../quantile.js';

interface TimedWord {
  word: string;
  start: number;
  end: number;
}

/** Pairs [reference index, hypothesis index] of equal normalised words, in order (a longest common subsequence). */
export function matchWords(ref: readonly string[], hyp: readonly string[]): [number, number][] {
  const n = ref.length;
  const m = hyp.length;
  const len = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      len[i][j] = ref[i] === hyp[j] ? len[i + 1][j + 1] + 1 : Math.max(len[i + 1][j], len[i][j + 1]);
  const pairs: [number, number][] = [];
  for (let i = 0, j = 0; i < n && j < m;) {
    if (ref[i] === hyp[j]) pairs.push([i++, j++]);
    else if (len[i + 1][j] >= len[i][j + 1]) i++;
    else j++;
  }
  return pairs;
}

/** Pairs [reference index, hypothesis index] of the same word, compared in the WER's normal form. */
export function matchTimedWords(reference: readonly TimedWord[], hypothesis: readonly Word[]): [number, number][] {
  // Without its periods: a sentence's last word is the same word.
  const one = (w: string) => normalizeWords(w).join(' ').replace(/\./g, '');
  return matchWords(
    reference.map((w) => one(w.word)),
    hypothesis.map((w) => one(w.word)),
  );
}

/** Start and end errors (seconds) of the hypothesis words that match a reference word (one word each). */
export function wordTimeErrors(
  reference: readonly TimedWord[],
  hypothesis: readonly Word[],
  pairs = matchTimedWords(reference, hypothesis),
): { start: number[]; end: number[] } {
  return {
    start: pairs.map(([i, j]) => Math.abs(hypothesis[j].start - reference[i].start)),
    end: pairs.map(([i, j]) => Math.abs(hypothesis[j].end - reference[i].end)),
  };
}

export interface PauseCounts {
  /** A reference pause with a gap at least as long between our words. */
  found: number;
  /** A reference pause where our words leave a shorter gap. */
  missed: number;
  /** A gap in our words where the reference has none as long. */
  spurious: number;
}

/**
 * Pauses of at least `gap` seconds between consecutive words, the reference's against the
 * hypothesis's, over the matched words that follow each other on both sides (elsewhere a
 * word between them, missing on one side, would make the silences incomparable).
 */
export function pauseCounts(
  reference: readonly TimedWord[],
  hypothesis: readonly Word[],
  gap: number,
  pairs = matchTimedWords(reference, hypothesis),
): PauseCounts {
  const n: PauseCounts = { found: 0, missed: 0, spurious: 0 };
  for (let k = 0; k + 1 < pairs.length; k++) {
    const [i, j] = pairs[k];
    if (pairs[k + 1][0] !== i + 1 || pairs[k + 1][1] !== j + 1) continue;
    const real = reference[i + 1].start - reference[i].end >= gap;
    const ours = hypothesis[j + 1].start - hypothesis[j].end >= gap;
    if (real) n[ours ? 'found' : 'missed']++;
    else if (ours) n.spurious++;
  }
  return n;
}

function value(argv: string[], name: string, dflt: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
}

async function main(argv: string[]): Promise<void> {
  const data = value(argv, 'data', 'calibration-data');
  const from = Number(value(argv, 'from', '0'));
  const limit = Number(value(argv, 'limit', '50'));
  const pauseGap = Number(value(argv, 'pause-gap', '0.5'));
  const policy = value(argv, 'policy', 'full') as PolicyName;
  const budget = Number(value(argv, 'budget', '0.2'));
  const backend = value(argv, 'backend', 'cpu') as 'cpu' | 'webgpu' | 'auto';
  const clips = readdirSync(data)
    .filter((f) => /\.json$/.test(f) && f !== 'manifest.json')
    .sort()
    .slice(from, from + limit);
  const asr = await loadTranscriber({ model: value(argv, 'model', 'public/models/wnw-ref'), backend, policy, budget });
  const start: number[] = [];
  const end: number[] = [];
  const pauses: PauseCounts = { found: 0, missed: 0, spurious: 0 };
  let refWords = 0;
  try {
    for (const f of clips) {
      const ref = JSON.parse(readFileSync(join(data, f), 'utf8')) as { words: TimedWord[] };
      const audio = await toMono16k(new Uint8Array(readFileSync(join(data, f.replace(/\.json$/, '.wav')))));
      const r = await asr.transcribe(audio);
      const pairs = matchTimedWords(ref.words, r.words);
      const e = wordTimeErrors(ref.words, r.words, pairs);
      start.push(...e.start);
      end.push(...e.end);
      const p = pauseCounts(ref.words, r.words, pauseGap, pairs);
      for (const k of ['found', 'missed', 'spurious'] as const) pauses[k] += p[k];
      refWords += ref.words.length;
      process.stderr.write(`word-times: ${f} ${e.start.length} of ${ref.words.length} words matched\n`);
    }
  } finally {
    asr.dispose();
  }
  const s = [...start].sort((a, b) => a - b);
  const t = [...end].sort((a, b) => a - b);
  const report = {
    data,
    from,
    clips: clips.length,
    policy,
    ...(policy === 'full' ? {} : { budget }),
    backend: asr.backend,
    matchedWords: start.length,
    referenceWords: refWords,
    startErrorS: { median: quantile(s, 0.5), p90: quantile(s, 0.9) },
    endErrorS: { median: quantile(t, 0.5), p90: quantile(t, 0.9) },
    pauses: { gapS: pauseGap, ...pauses },
  };
  if (argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
  else
    console.log(
      `${report.clips} clips of ${data}${from ? ` after the first ${from}` : ''}, ${policy}: ${report.matchedWords} of ${refWords} words matched; ` +
        `start error median ${report.startErrorS.median.toFixed(3)} s, p90 ${report.startErrorS.p90.toFixed(3)} s; ` +
        `end error median ${report.endErrorS.median.toFixed(3)} s, p90 ${report.endErrorS.p90.toFixed(3)} s; ` +
        `pauses of ${pauseGap} s: ${pauses.found} found, ${pauses.missed} missed, ${pauses.spurious} spurious`,
    );
}

if (process.argv[1]?.endsWith('word-times.ts')) void main(process.argv.slice(2));
