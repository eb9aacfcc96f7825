/**
 * Voice Score (WnW §3): how often a head's strongest audio attention falls inside the
 * audio span of the word being written. For each answer token t with an aligned word
 * span [a_t, b_t) seconds and alignment confidence ≥ 0.85, take the top-K audio
 * positions of each query head's attention (K ≈ one spoken word: 0.32 s, i.e. 4 at
 * 12.5 tokens/s, 8 at 25) and count the fraction inside the span. Average over the
 * clip's tokens, then over clips, then over the g query heads of each KV head.
 *
 * Streaming by design: the calibration CLI feeds one token's attention at a time, so no
 * [tokens × heads × T] tensor is ever held.
 */
import { topK } from '../policy/select.js';

export interface VoiceScoreShape {
  numLayers: number;
  /** Query heads per layer. */
  numHeads: number;
  numKvHeads: number;
  tokensPerSecond: number;
}

export interface WordSpan {
  /** Seconds from the start of the audio. */
  start: number;
  end: number;
  /** Alignment confidence in [0, 1]; absent: trusted (synthetic alignments are exact). */
  confidence?: number;
}

export interface VoiceScoreOptions {
  /** K; default round(0.32 s · tokensPerSecond), at least 1. */
  topK?: number;
  minConfidence?: number;
}

/** Audio token indices a word span covers: those whose [i/r, (i+1)/r) overlaps [a, b), i.e. ⌊a·r⌋ .. ⌈b·r⌉ − 1. */
export function spanTokens(
  span: WordSpan,
  tokensPerSecond: number,
  audioLength: number,
): [first: number, last: number] {
  const first = Math.max(0, Math.floor(span.start * tokensPerSecond));
  const last = Math.min(audioLength - 1, Math.max(first, Math.ceil(span.end * tokensPerSecond) - 1));
  return [first, last];
}

/** One clip's share of the Voice Score: per query head its token mean (null when no token counted). */
export interface ClipVoice {
  perQueryHead: number[] | null;
  tokens: number;
  skipped: number;
}

export class VoiceScoreAccumulator {
  readonly k: number;
  readonly minConfidence: number;
  private readonly qHeads: number;
  private readonly clipSum: Float64Array;
  private clipTokens = 0;
  private readonly total: Float64Array;
  private clipsCounted = 0;
  private tokensCounted = 0;
  private tokensSkipped = 0;
  /** tokensSkipped when the current clip began. */
  private skippedBefore = 0;

  constructor(
    readonly shape: VoiceScoreShape,
    opts: VoiceScoreOptions = {},
  ) {
    if (shape.numHeads % shape.numKvHeads !== 0) throw new Error('numHeads must be a multiple of numKvHeads');
    this.k = Math.max(1, opts.topK ?? Math.round(0.32 * shape.tokensPerSecond));
    this.minConfidence = opts.minConfidence ?? 0.85;
    this.qHeads = shape.numLayers * shape.numHeads;
    this.clipSum = new Float64Array(this.qHeads);
    this.total = new Float64Array(this.qHeads);
  }

  /**
   * One answer token. `attention(q)` gives query head q's softmax weights over the audio
   * positions (flat q = layer · numHeads + head; any normalisation, only the ranking
   * matters). Returns false when the token was skipped for low confidence.
   */
  addToken(span: WordSpan, audioLength: number, attention: (qHead: number) => ArrayLike<number>): boolean {
    if ((span.confidence ?? 1) < this.minConfidence || audioLength <= 0) {
      this.tokensSkipped++;
      return false;
    }
    const [first, last] = spanTokens(span, this.shape.tokensPerSecond, audioLength);
    const k = Math.min(this.k, audioLength);
    for (let q = 0; q < this.qHeads; q++) {
      const a = attention(q);
      if (a.length !== audioLength)
        throw new Error(`attention of query head ${q} has ${a.length} positions, expected ${audioLength}`);
      let hits = 0;
      for (const p of topK(a, k)) if (p >= first && p <= last) hits++;
      this.clipSum[q] += hits / k;
    }
    this.clipTokens++;
    this.tokensCounted++;
    return true;
  }

  /**
   * Closes a clip: its token mean joins the mean over clips (clips without usable tokens do
   * not count). Returns what the clip added, for `addClip` to restore in a later run.
   */
  endClip(): ClipVoice {
    const clip: ClipVoice = {
      perQueryHead: null,
      tokens: this.clipTokens,
      skipped: this.tokensSkipped - this.skippedBefore,
    };
    if (this.clipTokens > 0) clip.perQueryHead = Array.from(this.clipSum, (s) => s / this.clipTokens);
    this.clipSum.fill(0);
    this.clipTokens = 0;
    this.tokensCounted -= clip.tokens;
    this.tokensSkipped -= clip.skipped;
    this.addClip(clip);
    return clip;
  }

  /** A clip closed earlier (a resumed calibration's saved result). */
  addClip(clip: ClipVoice): void {
    if (clip.perQueryHead) {
      if (clip.perQueryHead.length !== this.qHeads)
        throw new Error(`a saved clip has ${clip.perQueryHead.length} query heads, expected ${this.qHeads}`);
      for (let q = 0; q < this.qHeads; q++) this.total[q] += clip.perQueryHead[q];
      this.clipsCounted++;
    }
    this.tokensCounted += clip.tokens;
    this.tokensSkipped += clip.skipped;
    this.skippedBefore = this.tokensSkipped;
  }

  /** Per query head VS, and per KV head the mean over its g query heads (GQA: query head h uses KV head ⌊h / g⌋). */
  result(): { perQueryHead: number[]; voiceScore: number[]; clips: number; tokens: number; skipped: number } {
    if (this.clipTokens > 0) this.endClip();
    const { numLayers, numHeads, numKvHeads } = this.shape;
    const g = numHeads / numKvHeads;
    const perQueryHead = Array.from(this.total, (s) => (this.clipsCounted ? s / this.clipsCounted : 0));
    const voiceScore: number[] = [];
    for (let l = 0; l < numLayers; l++) {
      for (let kv = 0; kv < numKvHeads; kv++) {
        let s = 0;
        for (let j = 0; j < g; j++) s += perQueryHead[l * numHeads + kv * g + j];
        voiceScore.push(s / g);
      }
    }
    return {
      perQueryHead,
      voiceScore,
      clips: this.clipsCounted,
      tokens: this.tokensCounted,
      skipped: this.tokensSkipped,
    };
  }
}
