/**
 * The page's live numbers: a progress bar per phase, the statistics strip, and the
 * transcript panes (one, or two in compare mode). Plain DOM; each piece owns its nodes.
 */
import {
  formatBytes,
  progressNote,
  type LiveResult,
  type LiveText,
  type ProgressEvent,
  type StepStats,
  type TranscriptionResult,
} from '../index.js';

type ProgressPhase = ProgressEvent['phase'];

export { formatBytes, progressNote };

const PHASES: [ProgressPhase, string][] = [
  ['download', 'Model download'],
  ['convert', 'Weight conversion'],
  ['upload', 'Upload to the GPU'],
  ['compile', 'Shader compilation'],
  ['encode', 'Audio encoding'],
  ['prefill', 'Prefill'],
  ['decode', 'Decoding'],
];

/** The phases of loading a model: done once per model, not per clip. */
const LOAD_PHASES = new Set<ProgressPhase>(['download', 'convert', 'upload', 'compile']);

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '–';
  const m = Math.floor(s / 60);
  return m ? `${m}:${String(Math.round(s % 60)).padStart(2, '0')} min` : `${s.toFixed(1)} s`;
}

export class ProgressView {
  /** `note`: the phase's last bytes or count. */
  private readonly bars = new Map<
    ProgressPhase,
    { box: HTMLElement; bar: HTMLProgressElement; pct: HTMLElement; note?: string }
  >();

  constructor(root: HTMLElement) {
    for (const [phase, label] of PHASES) {
      const box = el('div', 'phase');
      box.dataset.phase = phase;
      const head = el('div', 'label');
      const id = `progress-${phase}`;
      const name = el('label', undefined, label);
      name.htmlFor = id;
      const pct = el('span', undefined, '');
      pct.id = `progress-${phase}-text`;
      head.append(name, pct);
      const bar = el('progress');
      bar.id = id;
      bar.max = 1;
      bar.value = 0;
      box.append(head, bar);
      root.append(box);
      this.bars.set(phase, { box, bar, pct });
    }
  }

  /** Resets the per-clip phases; the model phases stay done once the model is loaded. */
  reset(keepModel: boolean): void {
    for (const [phase, b] of this.bars) {
      if (keepModel && LOAD_PHASES.has(phase)) continue;
      b.bar.value = 0;
      b.pct.textContent = '';
      b.note = undefined;
      b.box.classList.remove('active');
    }
  }

  /** `note`: what the percentage cannot say, e.g. the bytes read so far; default: the event's bytes or pipelines. */
  update(e: ProgressEvent, note = progressNote(e)): void {
    const b = this.bars.get(e.phase);
    if (!b) return;
    for (const other of this.bars.values()) other.box.classList.toggle('active', other === b && e.fraction < 1);
    const f = Math.max(0, Math.min(1, e.fraction));
    b.bar.value = f;
    // A closing event without figures ("model loaded") keeps the last ones; any other drops them.
    b.note = note ?? (f >= 1 ? b.note : undefined);
    b.pct.textContent = b.note ? `${Math.round(f * 100)} % · ${b.note}` : `${Math.round(f * 100)} %`;
    b.bar.title = e.detail ?? '';
  }
}

const STATS = [
  ['covered', 'Audio covered'],
  ['gpuKv', 'GPU KV memory'],
  ['textPages', 'Text KV pages'],
  ['rGpu', 'r_GPU'],
  ['mb', 'CPU→GPU MB/step'],
  ['tps', 'Tokens/s'],
  ['ms', 'ms/token'],
  ['rtf', 'Real-time factor'],
] as const;
type StatKey = (typeof STATS)[number][0];

export class StatsView {
  private readonly values = new Map<StatKey, HTMLElement>();

  constructor(root: HTMLElement) {
    for (const [key, label] of STATS) {
      const box = el('div', 'stat');
      const v = el('div', 'v', '–');
      v.id = `stat-${key}`;
      box.append(el('div', 'k', label), v);
      root.append(box);
      this.values.set(key, v);
    }
  }

  private set(key: StatKey, text: string): void {
    this.values.get(key)!.textContent = text;
  }

  clear(): void {
    for (const v of this.values.values()) v.textContent = '–';
  }

  covered(fraction: number): void {
    this.set('covered', `${Math.round(Math.max(0, Math.min(1, fraction)) * 100)} %`);
  }

  /** Per decode step. Rates are over the whole decode so far, not the last step: they would flicker. */
  step(s: StepStats, tokens: number, decodeMs: number, elapsedMs: number, audioSeconds: number): void {
    this.set('rGpu', s.rGpu.toFixed(3));
    this.set('textPages', String(s.textKvPages));
    this.set('mb', (s.bytesToGpu / 1e6).toFixed(3));
    this.set('ms', s.msPerToken.toFixed(1));
    if (decodeMs > 0) this.set('tps', (tokens / (decodeMs / 1000)).toFixed(1));
    if (audioSeconds > 0) this.set('rtf', `${(elapsedMs / 1000 / audioSeconds).toFixed(2)}×`);
  }

  final(r: TranscriptionResult): void {
    const { kv, traffic, timing } = r.stats;
    this.set('gpuKv', formatBytes(kv.gpuKvBytes));
    this.set('textPages', String(kv.textKvPages));
    this.set('rGpu', kv.rGpu.toFixed(3));
    this.set('mb', traffic.mbPerStep.toFixed(3));
    this.set('ms', timing.msPerToken.toFixed(1));
    if (timing.msPerToken > 0) this.set('tps', (1000 / timing.msPerToken).toFixed(1));
    this.set('rtf', `${timing.realTimeFactor.toFixed(2)}×`);
  }
}

/** One transcript with its heading and numbers; in compare mode there are two. */
export class Pane {
  readonly root = el('div', 'pane');
  private readonly meta = el('div', 'meta');
  readonly text = el('div', 'transcript');

  constructor(title: string, key: string) {
    this.root.dataset.pane = key;
    this.text.id = `transcript-${key}`;
    this.text.tabIndex = 0;
    this.text.setAttribute('aria-label', `${title} transcript`);
    this.root.append(el('h3', undefined, title), this.meta, this.text);
    this.meta.textContent = 'waiting…';
  }

  start(): void {
    this.text.textContent = '';
    this.text.classList.add('partial');
    this.meta.textContent = 'transcribing…';
  }

  append(piece: string): void {
    this.text.textContent += piece;
    this.text.scrollTop = this.text.scrollHeight;
  }

  finish(r: TranscriptionResult, werValue: number | null): void {
    this.text.textContent = r.text;
    this.text.classList.toggle('partial', Boolean(r.error));
    const s = r.stats;
    const parts = [
      `GPU KV <b>${formatBytes(s.kv.gpuKvBytes)}</b>`,
      `CPU KV <b>${formatBytes(s.kv.cpuKvBytes)}</b>`,
      `r_GPU <b>${s.kv.rGpu.toFixed(3)}</b>`,
      `<b>${s.traffic.mbPerStep.toFixed(3)}</b> MB/step`,
      `<b>${s.timing.msPerToken.toFixed(1)}</b> ms/token`,
      `<span data-tokens="${s.decodeSteps}">${s.decodeSteps}</span> tokens`,
    ];
    if (werValue !== null) parts.unshift(`WER <b data-wer="${werValue}">${(werValue * 100).toFixed(1)} %</b>`);
    if (r.error) parts.push(`<span class="partial-note">stopped early: partial</span>`);
    // Only numbers and fixed words go through innerHTML; the transcript itself is set as text above.
    this.meta.innerHTML = parts.join(' · ');
    this.root.dataset.done = r.error ? 'partial' : 'done';
  }

  failed(message: string): void {
    this.text.classList.remove('partial');
    this.meta.textContent = message;
    this.root.dataset.done = 'failed';
  }
}

/**
 * The fields a tick's text carries besides the text (timings, sizes: LiveText may gain
 * them), as "name value", nested objects one name deep per level.
 */
export function tickFields(t: LiveText): string {
  const out: string[] = [];
  const walk = (o: object, prefix: string) => {
    for (const [k, v] of Object.entries(o)) {
      if (!prefix && (k === 'committed' || k === 'tentative')) continue;
      if (typeof v === 'number') out.push(`${prefix}${k} ${Number.isInteger(v) ? v : v.toFixed(2)}`);
      else if (v && typeof v === 'object' && !Array.isArray(v)) walk(v, `${prefix}${k}.`);
    }
  };
  walk(t, '');
  return out.join(' · ');
}

/** A live recording's captions: the committed text, the tentative tail apart from it, and what was heard. */
export class LivePane {
  readonly root = el('div', 'pane');
  private readonly meta = el('div', 'meta');
  private readonly committed = el('span', 'committed');
  private readonly tentative = el('span', 'tentative');
  private readonly text = el('div', 'transcript live-captions');
  private ticks = 0;
  private seconds = 0;
  private fields = '';

  constructor(title: string) {
    this.root.dataset.pane = 'live';
    this.text.id = 'transcript-live';
    this.text.tabIndex = 0;
    this.text.setAttribute('aria-label', `${title} captions`);
    this.committed.id = 'live-committed';
    this.tentative.id = 'live-tentative';
    this.text.append(this.committed, ' ', this.tentative);
    this.root.append(el('h3', undefined, title), this.meta, this.text);
    this.meta.textContent = 'starting…';
  }

  heard(seconds: number): void {
    this.seconds = seconds;
    this.line();
  }

  show(t: LiveText): void {
    this.committed.textContent = t.committed;
    this.tentative.textContent = t.tentative;
    this.ticks++;
    this.fields = tickFields(t);
    this.line();
    this.text.scrollTop = this.text.scrollHeight;
  }

  private line(): void {
    const last = this.fields ? ` · last tick: ${this.fields}` : '';
    this.meta.textContent = `heard ${formatSeconds(this.seconds)} · ${this.ticks} ticks${last}`;
    this.root.dataset.heard = this.seconds.toFixed(2);
  }

  /** The live recording stopped: all of its text is committed. */
  finish(r: LiveResult): void {
    this.committed.textContent = r.text;
    this.tentative.textContent = '';
    const s = r.stats;
    const latency = s.latencyWords
      ? `commit latency median ${s.latencyMedianS.toFixed(2)} s, p90 ${s.latencyP90S.toFixed(2)} s`
      : 'no word dated';
    this.meta.textContent =
      `heard ${formatSeconds(s.audioSeconds)} · ${s.ticks} ticks, ${Math.round(s.tickMsMedian)} ms median, ` +
      `${Math.round(s.tickMsMax)} ms at most · ${latency}`;
    this.root.dataset.done = 'done';
  }

  /** Stopped by an error: the committed text stays, the tentative tail goes. */
  failed(message: string): void {
    this.tentative.textContent = '';
    this.meta.textContent = message;
    this.root.dataset.done = 'failed';
  }
}
