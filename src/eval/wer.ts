/**
 * WER as the method doc (and the paper) computes it: lower-case, strip punctuation
 * except the apostrophe and the period, truncate the hypothesis to 1.2× the reference
 * length in words, word-level Levenshtein (as jiwer). Pooled over clips it is total
 * edits / total reference words. A runaway hypothesis is capped by the truncation but
 * WER can still exceed 100 % (insertions and substitutions against a short reference).
 */

/** Hypothesis words kept per reference word. */
export const TRUNCATION_RATIO = 1.2;

/**
 * Normalised words: lower-case, typographic apostrophes folded to ', every Unicode
 * punctuation character other than ' and . removed (jiwer's RemovePunctuation deletes,
 * it does not split: "well-known" -> "wellknown"), split on whitespace.
 */
export function normalizeWords(text: string): string[] {
  const t = text
    .toLowerCase()
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    .replace(/[^\P{P}'.]/gu, '');
  return t.split(/\s+/).filter((w) => w.length > 0);
}

/** Hypothesis cut to floor(1.2 × reference words), as `hyp[:int(len(ref) * 1.2)]`. */
export function truncateHypothesis(ref: readonly string[], hyp: readonly string[]): readonly string[] {
  const keep = Math.floor(ref.length * TRUNCATION_RATIO + 1e-9);
  return hyp.length > keep ? hyp.slice(0, keep) : hyp;
}

export interface EditCounts {
  substitutions: number;
  deletions: number;
  insertions: number;
  /** Sum of the three: the word-level Levenshtein distance. */
  edits: number;
  /** Reference words (the WER denominator). */
  referenceWords: number;
  /** Hypothesis words after truncation. */
  hypothesisWords: number;
}

/**
 * Minimum edit alignment of word sequences. Two rows of (cost, S, D, I) keep memory
 * linear, so hour-long transcripts (10k+ words) fit; ties prefer substitution, then
 * deletion, then insertion, which gives jiwer's counts on the usual cases.
 */
export function alignWords(ref: readonly string[], hyp: readonly string[]): EditCounts {
  // Map words to ints once: the O(n·m) loop then compares numbers, not strings.
  const ids = new Map<string, number>();
  const id = (w: string) => {
    let v = ids.get(w);
    if (v === undefined) ids.set(w, (v = ids.size));
    return v;
  };
  const rAll = Int32Array.from(ref, id);
  const hAll = Int32Array.from(hyp, id);
  // A shared prefix and suffix never needs an edit: trimming them makes a good hour-long
  // transcript cost little more than its differing middle.
  let pre = 0;
  while (pre < rAll.length && pre < hAll.length && rAll[pre] === hAll[pre]) pre++;
  let suf = 0;
  while (
    suf < rAll.length - pre &&
    suf < hAll.length - pre &&
    rAll[rAll.length - 1 - suf] === hAll[hAll.length - 1 - suf]
  )
    suf++;
  const r = rAll.subarray(pre, rAll.length - suf);
  const h = hAll.subarray(pre, hAll.length - suf);
  const m = h.length;
  let cost = new Int32Array(m + 1);
  let sub = new Int32Array(m + 1);
  let del = new Int32Array(m + 1);
  let ins = new Int32Array(m + 1);
  let nCost = new Int32Array(m + 1);
  let nSub = new Int32Array(m + 1);
  let nDel = new Int32Array(m + 1);
  let nIns = new Int32Array(m + 1);
  for (let j = 0; j <= m; j++) {
    cost[j] = j;
    ins[j] = j;
  }
  for (let i = 1; i <= r.length; i++) {
    nCost[0] = i;
    nSub[0] = 0;
    nDel[0] = i;
    nIns[0] = 0;
    const ri = r[i - 1];
    for (let j = 1; j <= m; j++) {
      const same = ri === h[j - 1];
      const cDiag = cost[j - 1] + (same ? 0 : 1);
      const cDel = cost[j] + 1;
      const cIns = nCost[j - 1] + 1;
      if (cDiag <= cDel && cDiag <= cIns) {
        nCost[j] = cDiag;
        nSub[j] = sub[j - 1] + (same ? 0 : 1);
        nDel[j] = del[j - 1];
        nIns[j] = ins[j - 1];
      } else if (cDel <= cIns) {
        nCost[j] = cDel;
        nSub[j] = sub[j];
        nDel[j] = del[j] + 1;
        nIns[j] = ins[j];
      } else {
        nCost[j] = cIns;
        nSub[j] = nSub[j - 1];
        nDel[j] = nDel[j - 1];
        nIns[j] = nIns[j - 1] + 1;
      }
    }
    [cost, nCost] = [nCost, cost];
    [sub, nSub] = [nSub, sub];
    [del, nDel] = [nDel, del];
    [ins, nIns] = [nIns, ins];
  }
  return {
    substitutions: sub[m],
    deletions: del[m],
    insertions: ins[m],
    edits: cost[m],
    referenceWords: rAll.length,
    hypothesisWords: hAll.length,
  };
}

/** Edit counts of one clip after normalisation and truncation. */
export function werCounts(reference: string, hypothesis: string): EditCounts {
  const ref = normalizeWords(reference);
  const hyp = truncateHypothesis(ref, normalizeWords(hypothesis));
  return alignWords(ref, hyp);
}

/** WER of one clip as a fraction (0.05 = 5 %). An empty reference gives 0 (the truncated hypothesis is empty too). */
export function wer(reference: string, hypothesis: string): number {
  const c = werCounts(reference, hypothesis);
  return c.referenceWords === 0 ? 0 : c.edits / c.referenceWords;
}

/** Pooled counts over clips: sums of each count. */
export function pooledCounts(pairs: ReadonlyArray<{ reference: string; hypothesis: string }>): EditCounts {
  const total: EditCounts = {
    substitutions: 0,
    deletions: 0,
    insertions: 0,
    edits: 0,
    referenceWords: 0,
    hypothesisWords: 0,
  };
  for (const p of pairs) {
    const c = werCounts(p.reference, p.hypothesis);
    total.substitutions += c.substitutions;
    total.deletions += c.deletions;
    total.insertions += c.insertions;
    total.edits += c.edits;
    total.referenceWords += c.referenceWords;
    total.hypothesisWords += c.hypothesisWords;
  }
  return total;
}

/** Pooled WER: total edits / total reference words, as a fraction. */
export function pooledWer(pairs: ReadonlyArray<{ reference: string; hypothesis: string }>): number {
  const c = pooledCounts(pairs);
  return c.referenceWords === 0 ? 0 : c.edits / c.referenceWords;
}
