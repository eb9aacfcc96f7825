/**
 * `npm run eval:word-times -- [--data calibration-data] [--limit N] [--policy full] [--budget 0.2] [--backend cpu] [--json]`
 *
 * How far the transcript's word times (what subtitles are cut from) are from the
 * recordings' own word alignment: the calibration clips carry espeak-ng's word events
 * (`calibNNN.json` words, see calibration-data/README.md). Each clip is transcribed, its
 * words matched to the reference's by the longest common subsequence of their normalised
 * forms, and the start and end errors of the matched words pooled over the clips:
 * median and 90th percentile, in seconds.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { toMono16k } from '../audio/decode.js';
import { loadTranscriber } from '../transcribe/transcriber.js';
import { normalizeWords } from './wer.js';
import type { PolicyName, Word } from '../index.js';

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

/** The value below which `q` of the sorted values fall (linear between ranks). */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return NaN;
  const x = q * (sorted.length - 1);
  const lo = Math.floor(x);
  return sorted[lo] + (sorted[Math.min(lo + 1, sorted.length - 1)] - sorted[lo]) * (x - lo);
}

/** Start and end errors (seconds) of the hypothesis words that match a reference word (one word each). */
export function wordTimeErrors(
  reference: readonly TimedWord[],
  hypothesis: readonly Word[],
): { start: number[]; end: number[] } {
  // The WER's normal form, without its periods: a sentence's last word is the same word.
  const one = (w: string) => normalizeWords(w).join(' ').replace(/\./g, '');
  const pairs = matchWords(
    reference.map((w) => one(w.word)),
    hypothesis.map((w) => one(w.word)),
  );
  return {
    start: pairs.map(([i, j]) => Math.abs(hypothesis[j].start - reference[i].start)),
    end: pairs.map(([i, j]) => Math.abs(hypothesis[j].end - reference[i].end)),
  };
}

function value(argv: string[], name: string, dflt: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
}

async function main(argv: string[]): Promise<void> {
  const data = value(argv, 'data', 'calibration-data');
  const limit = Number(value(argv, 'limit', '50'));
  const policy = value(argv, 'policy', 'full') as PolicyName;
  const budget = Number(value(argv, 'budget', '0.2'));
  const backend = value(argv, 'backend', 'cpu') as 'cpu' | 'webgpu' | 'auto';
  const clips = readdirSync(data)
    .filter((f) => /\.json$/.test(f) && f !== 'manifest.json')
    .sort()
    .slice(0, limit);
  const asr = await loadTranscriber({ model: value(argv, 'model', 'public/models/wnw-ref'), backend, policy, budget });
  const start: number[] = [];
  const end: number[] = [];
  let refWords = 0;
  try {
    for (const f of clips) {
      const ref = JSON.parse(readFileSync(join(data, f), 'utf8')) as { words: TimedWord[] };
      const audio = await toMono16k(new Uint8Array(readFileSync(join(data, f.replace(/\.json$/, '.wav')))));
      const r = await asr.transcribe(audio);
      const e = wordTimeErrors(ref.words, r.words);
      start.push(...e.start);
      end.push(...e.end);
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
    clips: clips.length,
    policy,
    ...(policy === 'full' ? {} : { budget }),
    backend: asr.backend,
    matchedWords: start.length,
    referenceWords: refWords,
    startErrorS: { median: quantile(s, 0.5), p90: quantile(s, 0.9) },
    endErrorS: { median: quantile(t, 0.5), p90: quantile(t, 0.9) },
  };
  if (argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
  else
    console.log(
      `${report.clips} clips of ${data}, ${policy}: ${report.matchedWords} of ${refWords} words matched; ` +
        `start error median ${report.startErrorS.median.toFixed(3)} s, p90 ${report.startErrorS.p90.toFixed(3)} s; ` +
        `end error median ${report.endErrorS.median.toFixed(3)} s, p90 ${report.endErrorS.p90.toFixed(3)} s`,
    );
}

if (process.argv[1]?.endsWith('word-times.ts')) void main(process.argv.slice(2));
