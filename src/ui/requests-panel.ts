/**
 * What the page asks of a recording after its transcription, without encoding or
 * prefilling the audio again: its subtitles (SRT and WebVTT, cut from the dated words),
 * a question (a model that chats; a next one continues the conversation) and a
 * translation (a model whose prompt recipe has one). Each answer says what its request
 * reused of the audio's KV and what it prefilled itself. A live recording's words are not
 * dated: its subtitles take one transcription of the recording first.
 */
import { subtitleCues, toSrt, toVtt } from '../research.js';
import type { Recording, TranscribeOptions, TranscriptionResult } from '../index.js';

/** The options of a panel's request: the page's Stop, and the last run's policy (whose session it reuses). */
export type PanelOptions = Pick<TranscribeOptions, 'signal' | 'policy' | 'budget'>;

/** The request a button starts: the controller runs it (one at a time, with the page's Stop). */
export type PanelRequest = (
  run: (rec: Recording, options: PanelOptions) => Promise<TranscriptionResult>,
  what: string,
) => void;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** "reused 1,204 positions, prefilled 9 (0.4 s)": what a request took from the recording's KV. */
export function reuseLine(r: TranscriptionResult, ms: number): string {
  const p = r.stats.prompt;
  const n = (x: number) => x.toLocaleString('en');
  return `reused ${n(p.reusedPositions)} positions, prefilled ${n(p.prefilledPositions)} (${(ms / 1000).toFixed(1)} s)`;
}

export class RequestsPanel {
  private readonly ui = {
    root: $('requests'),
    links: $('subtitles-links'),
    srt: $<HTMLAnchorElement>('subtitles-srt'),
    subtitlesForm: $<HTMLFormElement>('subtitles-form'),
    vtt: $<HTMLAnchorElement>('subtitles-vtt'),
    askForm: $<HTMLFormElement>('ask-form'),
    question: $<HTMLInputElement>('ask-question'),
    translateForm: $<HTMLFormElement>('translate-form'),
    target: $<HTMLInputElement>('translate-target'),
    answers: $<HTMLOListElement>('answers'),
  };
  private urls: string[] = [];

  constructor(request: PanelRequest) {
    this.ui.subtitlesForm.addEventListener('submit', (e) => {
      e.preventDefault();
      request(async (rec, o) => {
        const r = await rec.transcribe(o);
        if (!r.error) this.show(rec, r);
        return r;
      }, 'Transcript with dated words, for subtitles');
    });
    this.ui.askForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const q = this.ui.question.value.trim();
      if (q) request((rec, o) => rec.ask(q, o), `Q: ${q}`);
    });
    this.ui.translateForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const to = this.ui.target.value.trim();
      if (to) request((rec, o) => rec.translate(to, o), `Translation into ${to}`);
    });
  }

  /** After a transcription of `rec`: its subtitles to download, and the requests the model can make. */
  show(rec: Recording, transcript: TranscriptionResult): void {
    for (const u of this.urls) URL.revokeObjectURL(u);
    const cues = subtitleCues(transcript.words);
    const link = (a: HTMLAnchorElement, text: string, type: string) => {
      a.href = URL.createObjectURL(new Blob([text], { type }));
      this.urls.push(a.href);
    };
    this.urls = [];
    link(this.ui.srt, toSrt(cues), 'application/x-subrip');
    link(this.ui.vtt, toVtt(cues), 'text/vtt');
    this.ui.links.hidden = false;
    this.ui.subtitlesForm.hidden = true;
    this.offer(rec);
  }

  /** After a live recording: no word is dated yet, so its subtitles take a transcription first. */
  showLive(rec: Recording): void {
    this.ui.links.hidden = true;
    this.ui.subtitlesForm.hidden = false;
    this.offer(rec);
  }

  private offer(rec: Recording): void {
    this.ui.askForm.hidden = !rec.can.ask;
    this.ui.translateForm.hidden = !rec.can.translate;
    this.ui.root.hidden = false;
  }

  /** A new recording: the answers about the last one go. */
  reset(): void {
    this.ui.answers.replaceChildren();
    this.ui.root.hidden = true;
  }

  setBusy(busy: boolean): void {
    for (const b of this.ui.root.querySelectorAll('button')) b.disabled = busy;
  }

  /** One request's answer, with what it reused. */
  answer(what: string, r: TranscriptionResult, ms: number): void {
    const li = document.createElement('li');
    const head = document.createElement('strong');
    head.textContent = what;
    const text = document.createElement('p');
    text.className = 'answer';
    text.textContent = r.text || '(no answer)';
    const note = document.createElement('span');
    note.className = 'muted small';
    note.dataset.reused = String(r.stats.prompt.reusedPositions);
    note.textContent = `${reuseLine(r, ms)}${r.error ? `; stopped: ${r.error.message}` : ''}`;
    li.append(head, text, note);
    this.ui.answers.append(li);
  }
}
