/**
 * Live transcription: audio arrives in chunks (`append`), and every tick (`tickSeconds` of
 * new audio) the model decodes a hypothesis of what follows the committed text; the words
 * two consecutive hypotheses agree on are committed (LocalAgreement-2), the rest is shown as
 * tentative. `stop` decodes the last hypothesis, commits all of it, and opens the audio as a
 * recording for questions and subtitles.
 *
 * A hypothesis attends a bounded window: `prefix | window's audio | instruction | text
 * committed since the window's start`. A model transcribes from the start of its audio, so
 * the audio and the text must start at the same word: once the window grows past
 * `windowSeconds`, it moves to the start of a committed word (the one after the widest pause
 * in its later half), and the text before that word leaves the prompt. A tick's cost is then
 * bounded by the window, whatever the recording's length (docs/usage.md, "Live").
 */
import { WnwError } from '../errors.js';
import type { TextTokenizer } from '../model/text/types.js';
import type { LiveRecording, Probe, Recording, TranscribeOptions, TranscriptionResult, Word } from '../types.js';
import type { ReplyWrapper } from '../model/families/types.js';
import { ReplyUnwrapper } from './reply.js';
import { quantile } from '../quantile.js';

/** What a tick shows: the text committed so far and the tentative rest of the last hypothesis. */
export interface LiveText {
  committed: string;
  tentative: string;
}

/**
 * `policy`, `budget` and `policyOptions` place the recording `stop` opens (its requests run
 * under them); a hypothesis's window is held whole whatever they are.
 */
export interface LiveOptions extends Pick<TranscribeOptions, 'policy' | 'budget' | 'policyOptions' | 'language'> {
  /** Evaluation only: each hypothesis's step logits (its steps counted from 0). */
  probe?: Pick<Probe, 'onLogits'>;
  /** Seconds of new audio between two hypotheses (2). */
  tickSeconds?: number;
  /** Tokens a hypothesis decodes at most (48): the speech of a tick and the lag behind it. */
  hypothesisTokens?: number;
  /**
   * Seconds of audio a hypothesis attends at most (12): past it, the window moves to a
   * committed word's start, leaving at most half of it. Bounds a tick's cost.
   */
  windowSeconds?: number;
  /**
   * Seconds behind the audio heard past which a word is committed as the latest hypothesis
   * has it, agreed or not (3): a model whose hypotheses keep changing a word does not hold
   * back all the words after it.
   */
  maxLagSeconds?: number;
  /** After each tick: the committed text so far and the latest hypothesis's tentative tail. */
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
  /** Ticks whose wall time exceeded `tickSeconds`: at real-time pace, the ticks a microphone would have run late. */
  ticksLate: number;
  /** The longest audio window a hypothesis attended, seconds. */
  windowSecondsMax: number;
  audioSeconds: number;
}

/** One tick: the audio heard when it ran, its window, its wall time and its session's GPU KV. */
export interface LiveTick {
  heardS: number;
  windowS: number;
  /** The window's audio, samples [fromSample, heard), and the committed ids its hypothesis followed, [textFrom, textTo). */
  fromSample: number;
  textFrom: number;
  textTo: number;
  ms: number;
  gpuKvBytes: number;
}

export interface LiveResult {
  text: string;
  tokens: number[];
  stats: LiveStats;
  /** Per committed word the hypothesis dated, in order: its latency in seconds (LiveStats'). */
  latencies: number[];
  /**
   * The committed words the hypotheses dated, in the recording's time (subtitleCues takes
   * them): where a word's hypothesis could not date its words, it is missing here.
   */
  words: Word[];
  ticks: LiveTick[];
  /**
   * The whole audio, open for questions and subtitles; null where it could not be opened
   * (`recordingError` says why: a recording past the model's positions): the text stays.
   */
  recording: Recording | null;
  recordingError?: Error;
}

/** What a live recording asks of its transcriber. */
export interface LiveHost {
  readonly sampleRate: number;
  readonly tokenizer: Pick<TextTokenizer, 'pieceText' | 'decoder'>;
  readonly replyWrappers: readonly ReplyWrapper[];
  /** The hypothesis after `committed` over `samples` (the window's audio), `maxNewTokens` at most; its words timed from the window's start. */
  hypothesis(
    samples: Float32Array,
    committed: readonly number[],
    maxNewTokens: number | undefined,
  ): Promise<TranscriptionResult>;
  /** The audio opened as a recording. */
  open(samples: Float32Array): Promise<Recording>;
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

/** A committed word: where its ids start among the committed ones, and when it is spoken (seconds). */
interface CommittedWord {
  token: number;
  start: number;
  end: number;
}

/** A live recording on this thread, over a transcriber's `LiveHost`. */
export class WnwLiveRecording implements LiveRecording {
  private readonly audio = new SampleLog();
  private tickedAt = 0;
  private committed: number[] = [];
  private previous: number[] | null = null;
  private committedText = '';
  private readonly unwrapper: ReplyUnwrapper;
  private readonly latencies: number[] = [];
  private readonly ticks: LiveTick[] = [];
  /** Every committed word the hypotheses dated, in the recording's time. */
  private readonly timed: Word[] = [];
  /** The committed words the hypotheses dated, from the window's first on (older ones are not needed). */
  private words: CommittedWord[] = [];
  /** The window: the sample its audio starts at, and the committed id its text starts at. */
  private windowSample = 0;
  private windowToken = 0;
  private pump: Promise<void> = Promise.resolve();
  private failure: unknown = null;
  private stopped = false;
  private readonly tickSamples: number;
  private readonly maxNew: number;
  private readonly maxLag: number;
  private readonly windowSeconds: number;

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
    const window = options.windowSeconds ?? 12;
    // Half a window must hold a tick, or a moved window would leave behind audio no hypothesis heard.
    if (!(window >= 2 * tick) || !Number.isFinite(window))
      throw new WnwError(
        'BAD_ARGUMENT',
        `windowSeconds must be a number of seconds at least twice tickSeconds (${2 * tick} s here), got ${String(window)}`,
      );
    this.tickSamples = Math.round(tick * host.sampleRate);
    this.maxNew = maxNew;
    this.maxLag = lag;
    this.windowSeconds = window;
    this.unwrapper = new ReplyUnwrapper(host.replyWrappers);
  }

  /** Seconds of audio heard so far. */
  get audioSeconds(): number {
    return this.audio.length / this.host.sampleRate;
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
    this.audio.push(samples);
    this.pump = this.pump.then(() => this.tickWhileDue());
    return this.pump;
  }

  /** Decodes the last hypothesis over the window, commits it, and opens the whole audio as a recording. */
  async stop(): Promise<LiveResult> {
    if (this.stopped) throw new WnwError('BAD_ARGUMENT', 'this live recording was stopped already');
    this.stopped = true;
    await this.pump;
    if (this.failure) throw this.failure;
    if (this.audio.length > this.windowSample) await this.tick(true);
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const ms = this.ticks.map((t) => t.ms).sort((a, b) => a - b);
    const tickMs = (this.options.tickSeconds ?? 2) * 1000;
    const stats: LiveStats = {
      ticks: this.ticks.length,
      latencyMedianS: sorted.length ? quantile(sorted, 0.5) : 0,
      latencyP90S: sorted.length ? quantile(sorted, 0.9) : 0,
      latencyWords: sorted.length,
      tickMsMedian: ms.length ? quantile(ms, 0.5) : 0,
      tickMsMax: ms.length ? ms[ms.length - 1] : 0,
      ticksLate: ms.filter((m) => m > tickMs).length,
      // A reduce, not a spread: a long session has more ticks than a call takes arguments.
      windowSecondsMax: this.ticks.reduce((m, t) => Math.max(m, t.windowS), 0),
      audioSeconds: this.audioSeconds,
    };
    let recording: Recording | null = null;
    let recordingError: Error | undefined;
    try {
      recording = await this.host.open(this.audio.range(0, this.audio.length));
    } catch (e) {
      recordingError = e instanceof Error ? e : new Error(String(e));
    }
    return {
      ...(recordingError ? { recordingError } : {}),
      text: this.committedText.trim(),
      tokens: [...this.committed],
      stats,
      latencies: [...this.latencies],
      words: [...this.timed],
      ticks: [...this.ticks],
      recording,
    };
  }

  private async tickWhileDue(): Promise<void> {
    while (!this.failure && this.audio.length - this.tickedAt >= this.tickSamples) {
      try {
        await this.tick(false);
      } catch (e) {
        this.failure = e;
      }
    }
  }

  private async tick(last: boolean): Promise<void> {
    const t0 = performance.now();
    const heard = (this.tickedAt = this.audio.length);
    const rate = this.host.sampleRate;
    const from = this.windowSample / rate;
    const window = { fromSample: this.windowSample, textFrom: this.windowToken, textTo: this.committed.length };
    const r = await this.host.hypothesis(
      this.audio.range(this.windowSample, heard),
      this.committed.slice(this.windowToken),
      // The last one runs to its end, within a transcription's own cap for the window's audio.
      last ? undefined : this.maxNew,
    );
    if (r.error) throw r.error;
    const hyp = r.tokens;
    const tok = this.host.tokenizer;
    const startsWord = (id: number) => tok.pieceText(id).startsWith(' ');
    const heardS = heard / rate;
    // Token index where each word of the hypothesis starts; the hypothesis dates its words in order, from the window's start.
    const starts = hyp.flatMap((id, i) => (i === 0 || startsWord(id) ? [i] : []));
    const dated =
      r.words.length === starts.length
        ? r.words.map((w) => ({ word: w.word, start: from + w.start, end: from + w.end }))
        : [];
    const agreed = this.previous ? agreedTokens(this.previous, hyp, startsWord) : 0;
    // Whole words that ended more than maxLag before the audio heard: committed as they are now.
    let old = 0;
    for (let k = 0; k + 1 < starts.length && k < dated.length && dated[k].end <= heardS - this.maxLag; k++)
      old = starts[k + 1];
    const n = last ? hyp.length : Math.max(agreed, old);
    if (n > 0) {
      const words = countWords(hyp.slice(0, n), startsWord);
      const base = this.committed.length;
      dated.slice(0, words).forEach((w, k) => {
        this.latencies.push(Math.max(0, heardS - Math.min(w.end, heardS)));
        this.words.push({ token: base + starts[k], start: w.start, end: w.end });
        this.timed.push(w);
      });
      this.commit(hyp.slice(0, n), startsWord);
    }
    this.previous = hyp.slice(n);
    this.ticks.push({
      heardS,
      windowS: heardS - from,
      ...window,
      ms: performance.now() - t0,
      gpuKvBytes: r.stats?.kv?.gpuKvBytes ?? 0,
    });
    if (!last) this.moveWindow(heardS);
    this.options.onText?.({
      committed: this.committedText.trim(),
      tentative: last ? '' : decoded(tok, this.previous).trim(),
    });
  }

  /**
   * Once the next tick's window would pass `windowSeconds`, moves it to the start of a
   * committed word in its later half: the one after the widest pause (the safest cut: the
   * word's dated start may be off by a piece), the latest among equals. Where no committed
   * word lies there, to the latest committed word after the window's start; where none does,
   * the audio before the later half produced no committed word and is left behind.
   */
  private moveWindow(heardS: number): void {
    const rate = this.host.sampleRate;
    const from = this.windowSample / rate;
    const next = heardS + this.tickSamples / rate;
    if (next - from <= this.windowSeconds) return;
    const half = next - this.windowSeconds / 2;
    let best: { cut: number; token: number; gap: number } | null = null;
    let latest: { cut: number; token: number } | null = null;
    for (let k = 1; k < this.words.length; k++) {
      const w = this.words[k];
      const gap = Math.max(0, w.start - this.words[k - 1].end);
      const cut = w.start - gap / 2;
      if (cut <= from || w.token <= this.windowToken) continue;
      latest = { cut, token: w.token };
      if (cut >= half && (!best || gap >= best.gap)) best = { cut, token: w.token, gap };
    }
    const to = best ?? latest ?? { cut: half, token: this.committed.length };
    this.windowSample = Math.min(this.audio.length, Math.max(this.windowSample, Math.round(to.cut * rate)));
    this.windowToken = to.token;
    this.words = this.words.filter((w) => w.token >= to.token);
  }

  private commit(ids: number[], startsWord: (id: number) => boolean): void {
    // A piece's text may depend on the ones before it (a decoder drops the first one's space,
    // bytes join into a character): the new ids are decoded after the last word committed
    // before them, and that word's text is cut off again. Decoding from the start would grow with the talk.
    const before = this.committed.length;
    let from = before - 1;
    while (from > 0 && !startsWord(this.committed[from])) from--;
    from = Math.max(0, from);
    this.committed.push(...ids);
    const tok = this.host.tokenizer;
    const text = decoded(tok, this.committed.slice(from)).slice(
      decoded(tok, this.committed.slice(from, before)).length,
    );
    this.committedText += this.unwrapper.push(text);
  }
}

/**
 * The audio heard, in blocks of a fixed size: appending never copies what came before, and
 * a tick copies out only its window, so neither grows with the recording.
 */
class SampleLog {
  private static readonly BLOCK = 1 << 19;
  private readonly blocks: Float32Array[] = [];
  length = 0;

  push(samples: Float32Array): void {
    for (let at = 0; at < samples.length;) {
      const inBlock = this.length % SampleLog.BLOCK;
      if (inBlock === 0) this.blocks.push(new Float32Array(SampleLog.BLOCK));
      const n = Math.min(SampleLog.BLOCK - inBlock, samples.length - at);
      this.blocks[this.blocks.length - 1].set(samples.subarray(at, at + n), inBlock);
      at += n;
      this.length += n;
    }
  }

  /** A copy of samples [from, to). */
  range(from: number, to: number): Float32Array {
    const out = new Float32Array(to - from);
    for (let at = from; at < to;) {
      const b = Math.floor(at / SampleLog.BLOCK);
      const inBlock = at - b * SampleLog.BLOCK;
      const n = Math.min(SampleLog.BLOCK - inBlock, to - at);
      out.set(this.blocks[b].subarray(inBlock, inBlock + n), at - from);
      at += n;
    }
    return out;
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
