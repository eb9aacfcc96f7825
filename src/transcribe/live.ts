/**
 * Live transcription, first version: audio arrives in chunks (`append`), and every tick
 * (`tickSeconds` of new audio) the model decodes a hypothesis of what follows the text
 * committed so far, over all the audio heard; the words two consecutive hypotheses agree on
 * are committed (LocalAgreement-2), the rest is shown as tentative. `stop` decodes the last
 * hypothesis over the whole audio, commits all of it, and opens the audio as a recording
 * for questions and subtitles.
 *
 * Each tick encodes and prefills the whole prompt again (`prefix | audio | instruction |
 * committed text`): its cost grows with the recording. The reference model needs the whole
 * committed text after the instruction (it transcribes from the start of its audio: a
 * suffix of the text loses its place, docs/usage.md "Live"), so what bounds a tick's cost is
 * still open: appending closed encoder windows' KV once and keeping the text's is the next step.
 */
import { WnwError } from '../errors.js';
import type { TextTokenizer } from '../model/text/types.js';
import type { TranscribeOptions, TranscriptionResult } from '../types.js';
import type { WnwRecording } from './recording.js';
import type { ReplyWrapper } from '../model/families/types.js';
import { ReplyUnwrapper } from './reply.js';
import { quantile } from '../quantile.js';

/** What a tick shows: the text committed so far and the tentative rest of the last hypothesis. */
export interface LiveText {
  committed: string;
  tentative: string;
}

export interface LiveOptions extends Pick<TranscribeOptions, 'policy' | 'budget' | 'policyOptions' | 'language'> {
  /** Seconds of new audio between two hypotheses (2). */
  tickSeconds?: number;
  /** Tokens a hypothesis decodes at most (48): the speech of a tick and the lag behind it. */
  hypothesisTokens?: number;
  /**
   * Seconds behind the audio heard past which a word is committed as the latest hypothesis
   * has it, agreed or not (3): a model whose hypotheses keep changing a word does not hold
   * back all the words after it.
   */
  maxLagSeconds?: number;
  onText?: (text: LiveText) => void;
}

export interface LiveStats {
  /** Hypotheses decoded (the last, at `stop`, included). */
  ticks: number;
  /** Per committed word: the audio heard when it was committed, less the time its word ends. */
  latencyMedianS: number;
  latencyP90S: number;
  /** Words whose latency was measured (those a hypothesis dated). */
  latencyWords: number;
  /** Wall time of a tick: median and the largest. */
  tickMsMedian: number;
  tickMsMax: number;
  audioSeconds: number;
}

export interface LiveResult {
  text: string;
  tokens: number[];
  stats: LiveStats;
  /** Per committed word the hypothesis dated, in order: its latency in seconds (LiveStats'). */
  latencies: number[];
  /** The whole audio, open for questions and subtitles. */
  recording: WnwRecording;
}

/** What a live recording asks of its transcriber. */
export interface LiveHost {
  readonly sampleRate: number;
  readonly tokenizer: Pick<TextTokenizer, 'pieceText' | 'decoder'>;
  readonly replyWrappers: readonly ReplyWrapper[];
  /** The hypothesis after `committed` over `samples` (all the audio heard), `maxNewTokens` at most. */
  hypothesis(samples: Float32Array, committed: readonly number[], maxNewTokens: number): Promise<TranscriptionResult>;
  /** The audio opened as a recording. */
  open(samples: Float32Array): Promise<WnwRecording>;
}

/**
 * LocalAgreement-2 on tokens: the longest common prefix of two consecutive hypotheses,
 * cut back to whole words (a word is whole when, in both, the next token starts another),
 * is committed. Returns how many tokens of `hypothesis` to commit.
 */
export function agreedTokens(
  previous: readonly number[],
  hypothesis: readonly number[],
  startsWord: (id: number) => boolean,
): number {
  let i = 0;
  while (i < previous.length && i < hypothesis.length && previous[i] === hypothesis[i]) i++;
  // The agreed part ends a word only where both go on with a new one ("cat" against "cat|s" is not agreed).
  const wordEnds = (h: readonly number[]) => i < h.length && startsWord(h[i]);
  while (i > 0 && !(wordEnds(hypothesis) && wordEnds(previous))) i--;
  return i;
}

export class LiveRecording {
  private readonly chunks: Float32Array[] = [];
  private heard = 0;
  private tickedAt = 0;
  private committed: number[] = [];
  private previous: number[] | null = null;
  private committedText = '';
  /** The committed ids decoded, before the reply unwrapper: what the next commit's text follows. */
  private committedRaw = '';
  private readonly unwrapper: ReplyUnwrapper;
  private readonly latencies: number[] = [];
  private readonly tickMs: number[] = [];
  private pump: Promise<void> = Promise.resolve();
  private failure: unknown = null;
  private stopped = false;
  private readonly tickSamples: number;
  private readonly maxNew: number;
  private readonly maxLag: number;

  constructor(
    private readonly host: LiveHost,
    private readonly options: LiveOptions = {},
  ) {
    const tick = options.tickSeconds ?? 2;
    if (!(tick > 0) || !Number.isFinite(tick))
      throw new WnwError('BAD_ARGUMENT', `tickSeconds must be a positive number of seconds, got ${String(tick)}`);
    const maxNew = options.hypothesisTokens ?? 48;
    if (!Number.isInteger(maxNew) || maxNew < 1)
      throw new WnwError('BAD_ARGUMENT', `hypothesisTokens must be a positive integer, got ${String(maxNew)}`);
    const lag = options.maxLagSeconds ?? 3;
    if (!(lag > 0))
      throw new WnwError('BAD_ARGUMENT', `maxLagSeconds must be a positive number of seconds, got ${String(lag)}`);
    this.tickSamples = Math.round(tick * host.sampleRate);
    this.maxNew = maxNew;
    this.maxLag = lag;
    this.unwrapper = new ReplyUnwrapper(host.replyWrappers);
  }

  /** Seconds of audio heard so far. */
  get audioSeconds(): number {
    return this.heard / this.host.sampleRate;
  }

  /**
   * Adds mono samples at the model's rate (16 kHz). Resolves when the ticks the audio heard
   * so far calls for have run: awaiting it paces a simulation; a microphone need not, and
   * the ticks it falls behind by are then one tick over all the audio heard.
   */
  append(samples: Float32Array): Promise<void> {
    if (this.stopped) return Promise.reject(new WnwError('BAD_ARGUMENT', 'this live recording was stopped'));
    if (!(samples instanceof Float32Array))
      return Promise.reject(new WnwError('BAD_ARGUMENT', 'append takes a Float32Array of mono samples at 16 kHz'));
    this.chunks.push(samples.slice());
    this.heard += samples.length;
    this.pump = this.pump.then(() => this.tickWhileDue());
    return this.pump;
  }

  /** Decodes the last hypothesis over all the audio, commits it, and opens the audio as a recording. */
  async stop(): Promise<LiveResult> {
    if (this.stopped) throw new WnwError('BAD_ARGUMENT', 'this live recording was stopped already');
    this.stopped = true;
    await this.pump;
    if (this.failure) throw this.failure;
    const audio = this.samples();
    if (audio.length > 0) await this.tick(audio, true);
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const ms = [...this.tickMs].sort((a, b) => a - b);
    const stats: LiveStats = {
      ticks: this.tickMs.length,
      latencyMedianS: sorted.length ? quantile(sorted, 0.5) : 0,
      latencyP90S: sorted.length ? quantile(sorted, 0.9) : 0,
      latencyWords: sorted.length,
      tickMsMedian: ms.length ? quantile(ms, 0.5) : 0,
      tickMsMax: ms.length ? ms[ms.length - 1] : 0,
      audioSeconds: this.audioSeconds,
    };
    const recording = await this.host.open(audio);
    return {
      text: this.committedText.trim(),
      tokens: [...this.committed],
      stats,
      latencies: [...this.latencies],
      recording,
    };
  }

  private async tickWhileDue(): Promise<void> {
    while (!this.failure && this.heard - this.tickedAt >= this.tickSamples) {
      try {
        await this.tick(this.samples(), false);
      } catch (e) {
        this.failure = e;
      }
    }
  }

  private samples(): Float32Array {
    if (this.chunks.length !== 1) {
      const all = new Float32Array(this.heard);
      let at = 0;
      for (const c of this.chunks) (all.set(c, at), (at += c.length));
      this.chunks.splice(0, this.chunks.length, all);
    }
    return this.chunks[0] ?? new Float32Array(0);
  }

  private async tick(audio: Float32Array, last: boolean): Promise<void> {
    const t0 = performance.now();
    this.tickedAt = audio.length;
    const r = await this.host.hypothesis(audio, this.committed, last ? Number.MAX_SAFE_INTEGER : this.maxNew);
    if (r.error) throw r.error;
    const hyp = r.tokens;
    const tok = this.host.tokenizer;
    const startsWord = (id: number) => tok.pieceText(id).startsWith(' ');
    const heardS = audio.length / this.host.sampleRate;
    // Token index where each word of the hypothesis starts; the hypothesis dates its words in order.
    const starts = hyp.flatMap((id, i) => (i === 0 || startsWord(id) ? [i] : []));
    const dated = r.words.length === starts.length ? r.words : [];
    const agreed = this.previous ? agreedTokens(this.previous, hyp, startsWord) : 0;
    // Whole words that ended more than maxLag before the audio heard: committed as they are now.
    let old = 0;
    for (let k = 0; k + 1 < starts.length && k < dated.length && dated[k].end <= heardS - this.maxLag; k++)
      old = starts[k + 1];
    const n = last ? hyp.length : Math.max(agreed, old);
    if (n > 0) {
      const words = countWords(hyp.slice(0, n), startsWord);
      for (const w of dated.slice(0, words)) this.latencies.push(Math.max(0, heardS - Math.min(w.end, heardS)));
      this.commit(hyp.slice(0, n));
    }
    this.previous = hyp.slice(n);
    this.tickMs.push(performance.now() - t0);
    this.options.onText?.({
      committed: this.committedText.trim(),
      tentative: last ? '' : decoded(tok, this.previous).trim(),
    });
  }

  private commit(ids: number[]): void {
    // Decoded from all the committed ids at once: a piece's text may depend on the ones before it.
    this.committed.push(...ids);
    const raw = decoded(this.host.tokenizer, this.committed);
    this.committedText += this.unwrapper.push(raw.slice(this.committedRaw.length));
    this.committedRaw = raw;
  }
}

function countWords(ids: readonly number[], startsWord: (id: number) => boolean): number {
  let n = 0;
  ids.forEach((id, i) => (i === 0 || startsWord(id) ? n++ : 0));
  return n;
}

function decoded(tok: Pick<TextTokenizer, 'decoder'>, ids: readonly number[]): string {
  const s = tok.decoder();
  let text = '';
  for (const id of ids) text += s.push(id);
  return text + s.flush();
}
