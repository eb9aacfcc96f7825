/**
 * Corpus BLEU as sacreBLEU computes it by default (BLEU|nrefs:N|case:mixed|eff:no|tok:13a|
 * smooth:exp): the 13a tokeniser (mteval-v13a's), n-grams up to 4 clipped by the most
 * counts in any one reference, the closest reference length for the brevity penalty (the
 * shorter on a tie), and 'exp' smoothing of zero precisions. Checked against the test
 * vectors in sacreBLEU's own test suite (test/test_bleu.py), see test/unit/eval-bleu.test.ts.
 */

/** sacreBLEU's '13a' tokeniser: mteval-v13a's language-independent part, then its punctuation rules. */
export function tokenize13a(line: string): string {
  let s = line
    .replaceAll('<skipped>', '')
    .replaceAll('-\n', '')
    .replaceAll('\n', ' ')
    .replaceAll('&quot;', '"')
    .replaceAll('&amp;', '&')
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>');
  s = ` ${s} `;
  // ASCII symbols: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ /
  s = s.replace(/([{-~[-` -&(-+:-@/])/g, ' $1 ');
  // Period and comma split off unless preceded by a digit, then unless followed by one.
  s = s.replace(/([^0-9])([.,])/g, '$1 $2 ');
  s = s.replace(/([.,])([^0-9])/g, ' $1 $2');
  // A dash after a digit.
  s = s.replace(/([0-9])(-)/g, '$1 $2 ');
  return s.trim().split(/\s+/).filter(Boolean).join(' ');
}

export interface BleuOptions {
  /** '13a' (sacreBLEU's default) or 'none' (split on whitespace only). */
  tokenize?: '13a' | 'none';
  /** 'exp' (sacreBLEU's default) or 'none'. */
  smooth?: 'exp' | 'none';
}

export interface BleuScore {
  /** 0..100, as sacreBLEU reports it. */
  score: number;
  /** Clipped n-gram matches and hypothesis n-grams, n = 1..4. */
  counts: number[];
  totals: number[];
  /** Precisions in percent, after smoothing. */
  precisions: number[];
  bp: number;
  sysLen: number;
  refLen: number;
}

const ORDER = 4;

function ngrams(words: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (let n = 1; n <= ORDER; n++) {
    for (let i = 0; i + n <= words.length; i++) {
      const g = words.slice(i, i + n).join(' ');
      m.set(g, (m.get(g) ?? 0) + 1);
    }
  }
  return m;
}

/**
 * Corpus BLEU of `hypotheses` against reference streams, sacreBLEU's convention:
 * `references[k][i]` is the k-th reference of segment i (every stream as long as the hypotheses).
 */
export function bleu(
  hypotheses: readonly string[],
  references: readonly (readonly string[])[],
  options: BleuOptions = {},
): BleuScore {
  const tok =
    (options.tokenize ?? '13a') === '13a'
      ? tokenize13a
      : (s: string) => s.trim().split(/\s+/).filter(Boolean).join(' ');
  for (const stream of references) {
    if (stream.length !== hypotheses.length)
      throw new Error(`bleu: a reference stream has ${stream.length} segments for ${hypotheses.length} hypotheses`);
  }
  const counts = new Array<number>(ORDER).fill(0);
  const totals = new Array<number>(ORDER).fill(0);
  let sysLen = 0;
  let refLen = 0;
  hypotheses.forEach((hyp, i) => {
    const h = tok(hyp).split(' ').filter(Boolean);
    const refs = references.map((stream) => tok(stream[i]).split(' ').filter(Boolean));
    // Closest reference length; the shorter on a tie.
    let closest = -1;
    for (const r of refs) {
      const d = Math.abs(r.length - h.length);
      const best = Math.abs(closest - h.length);
      if (closest < 0 || d < best || (d === best && r.length < closest)) closest = r.length;
    }
    sysLen += h.length;
    refLen += Math.max(closest, 0);
    const maxRef = new Map<string, number>();
    for (const r of refs) for (const [g, c] of ngrams(r)) if (c > (maxRef.get(g) ?? 0)) maxRef.set(g, c);
    for (const [g, c] of ngrams(h)) counts[g.split(' ').length - 1] += Math.min(c, maxRef.get(g) ?? 0);
    for (let n = 1; n <= ORDER; n++) totals[n - 1] += Math.max(0, h.length - n + 1);
  });
  const precisions = new Array<number>(ORDER).fill(0);
  const empty = { counts, totals, precisions, bp: 0, sysLen, refLen };
  if (sysLen === 0) return { score: 0, ...empty };
  const bp = sysLen < refLen ? Math.exp(1 - refLen / sysLen) : 1;
  let smooth = 1;
  for (let n = 0; n < ORDER; n++) {
    if (totals[n] === 0) break;
    if (counts[n] === 0 && (options.smooth ?? 'exp') === 'exp') {
      smooth *= 2;
      precisions[n] = 100 / (smooth * totals[n]);
    } else {
      precisions[n] = (100 * counts[n]) / totals[n];
    }
  }
  // A zero precision makes the score 0 (sacreBLEU's log of 0 is a large negative number).
  const score = precisions.some((p) => p === 0)
    ? 0
    : bp * Math.exp(precisions.reduce((s, p) => s + Math.log(p), 0) / ORDER);
  return { score, counts, totals, precisions, bp, sysLen, refLen };
}
