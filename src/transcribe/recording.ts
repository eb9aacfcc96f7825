/**
 * A recording kept for many requests: its encoding, and the decode session its last
 * request left open (the conversation). Every prompt a family builds is
 * `prefix | audio | instruction`, and within a recording the prefix is the same for every
 * request (one system message for all), so a next request rewinds the session to the end
 * of the audio (or, for a follow-up question, of the conversation) and prefills only its
 * own ids, one step each. The policy's placement stays: anchors and tidal heads keep what
 * they hold and recall for the new request as they do while decoding. What a placement
 * dropped (WnW's fixed heads, the prefill-only policies) was chosen for the prompt that
 * placed it: a request with other ids after the audio places the audio again, from the
 * kept encoding, as does one with another policy, budget or readouts (docs/usage.md,
 * "One recording, many requests").
 *
 * Same request, same answer: every resumed request starts from the placement's state, the
 * KV its first decode step saw (what a request since recalled released, what it released
 * recalled) and the policy restarted (KvPolicy.restart), so what ran in between changes
 * nothing; the placement's own prompt, its rows written over by another request, runs again
 * as its prefill ran it (run.ts, `replay`).
 */
import { WnwError } from '../errors.js';
import type { DecodeSession } from '../backend/types.js';
import { audioStart, type PromptIds } from '../model/config.js';
import type { LoadedModel } from '../model/loader.js';
import type { Recording, RequestOptions, TranscribeOptions, TranscriptionResult } from '../types.js';
import { lostPositions, type DecodeSetup, type Placement, type RunInput, type RunOutcome } from './run.js';
import { checkSubtitleFormat, isTranscriptionResult, subtitlesOf } from './subtitles.js';

/** What a request is; a question continues the conversation only after a question. */
export type RequestKind = 'transcribe' | 'translate' | 'ask';

/** The prompt a request asks for: its task's, or a question's. */
export interface RequestPrompt {
  kind: RequestKind;
  targetLanguage?: string;
  question?: string;
  fresh?: boolean;
}

/** The session a recording's last request left open, and what its KV holds after the audio. */
export interface Conversation {
  session: DecodeSession;
  setup: DecodeSetup;
  /** What must match for a request to reuse it: the policy, its options and the readouts. */
  key: string;
  /** The prompt's ids before the audio (a request with other ones prefills again). */
  prefix: readonly number[];
  /** The policy that placed the KV, with its state, and its name and budget for the stats. */
  policy: Pick<RunInput, 'policy' | 'policyName' | 'budget' | 'timingHeads' | 'tidalHeads'>;
  /** The sequence position where the audio ends: every request forks there or later. */
  audioEnd: number;
  /** The last request's kind; a question after a question continues from `end`. */
  last: RequestKind | 'cancelled';
  /** Where the last request's written ids end (its prompt and the answer's fed tokens). */
  end: number;
  /** The answer's tokens never fed to a step (the length guard stopped before them). */
  pending: number[];
  /** The ids written after the audio, in order: the prompt's and the answers'. */
  ids: number[];
  /**
   * The request that placed the audio: its ids after the audio (the rows whose attention the
   * policy read, prefilled with every audio position in view), the token they predicted, and
   * the positions it dropped. A request with the same ids reuses them as they are; another,
   * where anything was dropped, places the audio again (a fresh run would have kept others).
   */
  placement: Placement & { afterAudio: readonly number[] };
  /** Whether the KV still holds the placement's rows after the audio (no request since forked inside them). */
  placedRows: boolean;
}

/** A request resumed on the conversation: its own ids to feed, or none and the placement's first token. */
export interface Resumption {
  conversation: Conversation;
  feed: readonly number[];
  first?: number;
  /** `feed` is the placement's own prompt, its rows written over since: they run as its prefill ran them (RunInput.resume.replay). */
  replay?: boolean;
}

/** What a recording asks of the transcriber that opened it. */
export interface RecordingHost {
  readonly model: LoadedModel;
  /** Runs `job` after every call queued before it (the backend holds one session). */
  serial<T>(job: () => Promise<T>): Promise<T>;
  /**
   * Runs one request on the recording's encoding: on `conversation` where it is given
   * (resumed with `feed`), else in a new session left open.
   */
  run(
    rec: WnwRecording,
    prompt: PromptIds,
    options: TranscribeOptions,
    resume: Resumption | undefined,
    encodeMs: number,
  ): Promise<RunOutcome & { key: string; policy: Conversation['policy'] }>;
  /** The key a request's options give its session (policy, budget, options, readouts). */
  sessionKey(options: TranscribeOptions): string;
  /** The prompt ids of a request, with the recording's system message. */
  promptOf(language: string | undefined, p: RequestPrompt, system: string | null | undefined): Promise<PromptIds>;
  /** The ids that ask `question` next after an answer. */
  followUp(question: string, system: string | null | undefined): Promise<number[]>;
  /** The recording is done with the backend's session (dispose). */
  release(rec: WnwRecording): void;
}

export class WnwRecording implements Recording {
  private conversation: Conversation | null = null;
  private disposed: string | null = null;
  /** The last transcription, its options' key and the placement it ran on: what `subtitles` may cut from. */
  private lastTranscript: { key: string; placement: Conversation['placement']; result: TranscriptionResult } | null =
    null;

  constructor(
    private readonly host: RecordingHost,
    /** The encoding every request decodes from, and the time it took (told by the first request). */
    readonly encoding: { embeddings: Float32Array; audioLength: number; audioSeconds: number; encodeMs: number },
    private readonly system: string | null | undefined,
    /** What a request's options leave out, taken from here: a live recording's policy. */
    private readonly defaults: Pick<RequestOptions, 'policy' | 'budget' | 'policyOptions'> = {},
  ) {}

  get audioSeconds(): number {
    return this.encoding.audioSeconds;
  }

  get can(): Recording['can'] {
    const recipe = this.host.model.family?.prompt;
    return { ask: !!recipe, translate: !!recipe?.translation };
  }

  /** Whether a request has told the encode's time yet (the first one does, the rest took none). */
  private encodeTold = false;

  transcribe(options: RequestOptions = {}): Promise<TranscriptionResult> {
    return this.request({ kind: 'transcribe' }, options);
  }

  translate(targetLanguage: string, options: RequestOptions = {}): Promise<TranscriptionResult> {
    return this.request({ kind: 'translate', targetLanguage }, options);
  }

  async ask(question: string, options: RequestOptions & { fresh?: boolean } = {}): Promise<TranscriptionResult> {
    if (typeof question !== 'string' || !question.trim())
      throw new WnwError('BAD_ARGUMENT', `a question must be a non-empty string, got ${JSON.stringify(question)}`);
    const { fresh, ...rest } = options;
    return this.request({ kind: 'ask', question, fresh: fresh === true }, rest);
  }

  /**
   * Cut from `from` where it is a result; else from a transcription with those options. A
   * request repeated on the same placement gives the answer it gave, so the last
   * transcription's result stands in for that one where it ran with the same options on the
   * placement the recording holds now; anything else runs it.
   */
  async subtitles(format: 'srt' | 'vtt', from: TranscriptionResult | RequestOptions = {}): Promise<string> {
    checkSubtitleFormat(format);
    if (isTranscriptionResult(from)) return subtitlesOf(format, from);
    const options = { ...this.defaults, ...from };
    const last = this.lastTranscript;
    const same = last && last.key === this.transcriptKey(options) && last.placement === this.conversation?.placement;
    return subtitlesOf(format, same ? last.result : await this.transcribe(options));
  }

  /** What a transcription's answer depends on besides the placement: its session's key, language and length cap. */
  private transcriptKey(options: RequestOptions): string {
    return JSON.stringify([this.host.sessionKey(options), options.language ?? null, options.maxNewTokens ?? null]);
  }

  /** Frees the session this recording holds; `why` is what a later call is told. */
  dispose(why = 'this recording was disposed; open the audio again'): void {
    if (this.disposed) return;
    this.disposed = why;
    this.drop();
    this.host.release(this);
  }

  /** Closes the conversation's session (another user of the backend opens one). */
  drop(): void {
    this.conversation?.session.close();
    this.conversation = null;
  }

  /** The last request's whole prompt: its prefix, and its ids after the audio (a follow-up's hold the conversation before it). */
  lastPrompt: { prefix: readonly number[]; afterAudio: readonly number[] } | null = null;

  private async request(p: RequestPrompt, asked: RequestOptions): Promise<TranscriptionResult> {
    const options = { ...this.defaults, ...asked };
    const task = options as TranscribeOptions;
    if (task.task !== undefined || task.targetLanguage !== undefined)
      throw new WnwError(
        'BAD_ARGUMENT',
        'a recording names the task by its method (transcribe, translate, ask): drop the options task and targetLanguage',
      );
    return this.host.serial(() => this.requestNow(p, options));
  }

  private async requestNow(p: RequestPrompt, options: RequestOptions): Promise<TranscriptionResult> {
    if (this.disposed) throw new WnwError('BAD_ARGUMENT', this.disposed);
    let prompt = await this.host.promptOf(options.language, p, this.system);
    const key = this.host.sessionKey(options);
    const conv = this.conversation;
    const same = conv && conv.key === key && sameIds(conv.prefix, prompt.prefix) ? conv : null;
    let resume: Resumption | undefined;
    let placedRows = true;
    let afterAudio: readonly number[] = prompt.instruction;
    if (same) {
      const follows = p.kind === 'ask' && !p.fresh && same.last === 'ask';
      const ownIds = follows
        ? [...same.pending, ...(await this.host.followUp(p.question!, this.system))]
        : prompt.instruction;
      if (follows) afterAudio = [...same.ids, ...ownIds];
      const placed = same.placement;
      // The placement's own prompt again: its rows' KV, written by the prefill, and the token they predicted are kept.
      const again = same.placedRows && sameIds(afterAudio, placed.afterAudio);
      const fork = again ? same.audioEnd + afterAudio.length : follows ? same.end : same.audioEnd;
      const feed = again ? [] : ownIds;
      // The placement's own prompt after a request wrote over its rows: written again as the prefill wrote them.
      const replay = !again && !follows && feed.length > 0 && sameIds(afterAudio, placed.afterAudio);
      const left = this.host.model.config.maxPositions - fork - feed.length;
      if (left < 1)
        throw new WnwError(
          'CONTEXT_TOO_LONG',
          `this request needs ${feed.length} positions after the ${fork} the recording's conversation holds, ` +
            `and ${Math.max(0, this.host.model.config.maxPositions - fork)} remain of the model's ${this.host.model.config.maxPositions}: ` +
            (follows ? 'ask it with { fresh: true } to start again from the audio' : 'ask a shorter question'),
        );
      // What the placement dropped was chosen for its own prompt: any other places the audio again.
      const lost = lostPositions(same.session, this.encoding.audioLength);
      if (lost === 0 || (again && lost === placed.lost)) {
        await same.session.rewind(fork);
        placedRows = same.placedRows && fork >= same.audioEnd + placed.afterAudio.length;
        resume = { conversation: same, feed, ...(again ? { first: placed.first } : {}), ...(replay ? { replay } : {}) };
      } else {
        this.drop();
        prompt = { prefix: prompt.prefix, instruction: afterAudio };
      }
    } else {
      this.drop();
    }
    const encodeMs = this.encodeTold ? 0 : this.encoding.encodeMs;
    this.encodeTold = true;
    const out = await this.host.run(this, prompt, options, resume, encodeMs);
    const r = out.result;
    this.lastPrompt = { prefix: prompt.prefix, afterAudio };
    if (out.open && (resume || out.placement)) {
      this.conversation = {
        session: out.open.session,
        setup: out.open.setup,
        policy: out.policy,
        key: out.key,
        prefix: prompt.prefix,
        audioEnd: audioStart(prompt) + this.encoding.audioLength,
        last: r.error ? 'cancelled' : p.kind,
        end: out.reusedPositions + out.prefilledPositions + out.written.length,
        pending: out.pending,
        ids: [...afterAudio, ...out.written],
        placement: resume ? resume.conversation.placement : { afterAudio, ...out.placement! },
        placedRows,
      };
    } else {
      this.conversation = null;
    }
    this.lastTranscript =
      p.kind === 'transcribe' && !r.error && this.conversation
        ? { key: this.transcriptKey(options), placement: this.conversation.placement, result: r }
        : this.lastTranscript;
    return r;
  }
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
