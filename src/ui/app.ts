/**
 * The demo page's controller: picks a clip, loads the model once per backend, runs one
 * transcription (or two in compare mode, or live captions from the microphone), streams
 * tokens and steps into the views, and turns every failure into a notice with a way
 * forward. The transcriber comes from `deps.load`, so the same page runs the engine in a
 * worker or on the main thread.
 */
import { hasFixedBudget } from '../research.js';
import { microphoneRefused, wireFileInput, wireRecorder, wireSamples, type Clip } from './audio-input.js';
import { WEBGPU_HELP, describeError, webGpuMissing, type UiMessage } from './messages.js';
import { ModelSource, type ChosenModel } from './model-source.js';
import { CalibratePanel } from './calibrate-panel.js';
import { LivePane, Pane, ProgressView, StatsView, formatBytes, formatSeconds } from './readouts.js';
import { canCapture, captureMicrophone, type Capture } from './live-capture.js';
import { TideChart } from './tide-chart.js';
import { RequestsPanel, reuseLine, type PanelOptions } from './requests-panel.js';
import {
  localFolderBytes,
  type KvPrecision,
  type LoadOptions,
  type PolicyName,
  type Recording,
  type Transcriber,
  type TranscriptionResult,
} from '../index.js';

export interface AppDeps {
  /** `inPage`: a folder picked from disk, whose Files live in this page (see model-source.ts). */
  load(options: LoadOptions, inPage?: boolean): Promise<Transcriber>;
  /** Any audio the browser decodes, to 16 kHz mono; throws a BAD_AUDIO error otherwise. */
  decode(blob: Blob): Promise<Float32Array>;
  wer(reference: string, hypothesis: string): number;
  /** Absolute URL of the model folder (a worker resolves relative URLs against its own script). */
  modelUrl: string;
  /** How the page names `modelUrl` (default: "the shipped model"). */
  modelLabel?: string;
  sampleRate: number;
}

/**
 * The one-line verdict of compare mode: memory saved, time paid, and what the policy's
 * transcript lost against the full cache's (WER vs full; the reference text plays no part).
 */
function compareLine(full: TranscriptionResult, other: TranscriptionResult, wer: AppDeps['wer']): string {
  const a = full.stats;
  const b = other.stats;
  const saved = a.kv.gpuKvBytes > 0 ? Math.round((1 - b.kv.gpuKvBytes / a.kv.gpuKvBytes) * 100) : 0;
  const time =
    a.timing.msPerToken > 0 ? `${(b.timing.msPerToken / a.timing.msPerToken).toFixed(2)}× the time per token` : '';
  const vsFull = full.text
    ? `; WER vs the full cache's transcript ${(wer(full.text, other.text) * 100).toFixed(1)} %`
    : '';
  return `Compared: GPU KV memory ${formatBytes(a.kv.gpuKvBytes)} (full) vs ${formatBytes(b.kv.gpuKvBytes)} (${b.policy}), ${saved} % less; ${time}${vsFull}.`;
}

/** Why 'auto' chose the CPU. A software adapter (SwiftShader) is a deliberate choice, not a browser problem. */
function fallbackNotice(detail: string): UiMessage {
  if (/software adapter/i.test(detail)) {
    return {
      level: 'info',
      title: 'Running on the CPU backend',
      body:
        'This browser offers only a software WebGPU adapter (no GPU driver in use), which is slower than the CPU backend, ' +
        'so the CPU backend runs. Choose "WebGPU" under Backend to use it anyway.',
    };
  }
  return { level: 'info', title: 'Running on the CPU backend', body: detail, hint: WEBGPU_HELP };
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

export class App {
  private readonly ui = {
    notice: $<HTMLDivElement>('notice'),
    backendReadout: $('backend-readout'),
    clip: $('clip'),
    clipName: $('clip-name'),
    clipAudio: $<HTMLAudioElement>('clip-audio'),
    policy: $<HTMLSelectElement>('policy'),
    budget: $<HTMLSelectElement>('budget'),
    backend: $<HTMLSelectElement>('backend'),
    kv: $<HTMLSelectElement>('kv'),
    compare: $<HTMLInputElement>('compare'),
    start: $<HTMLButtonElement>('start'),
    live: $<HTMLButtonElement>('live'),
    cancel: $<HTMLButtonElement>('cancel'),
    status: $('status'),
    panes: $('panes'),
  };
  private readonly progress = new ProgressView($('progress'));
  private readonly stats = new StatsView($('readouts'));
  private readonly chart = new TideChart($<HTMLCanvasElement>('tide'));
  private clip: Clip | null = null;
  private audio: Float32Array | null = null;
  private model: ChosenModel;
  private readonly modelSource: ModelSource;
  private readonly calibration: CalibratePanel;
  /** Loaded for one (model, backend, KV precision) choice: `key`. */
  private transcriber: { key: string; asr: Promise<Transcriber> } | null = null;
  private abort: AbortController | null = null;
  /** Set while the live button records: it stops the live recording instead of starting one. */
  private liveRunning = false;
  /** The clip open on the loaded transcriber: every run and request on it shares its encoding. */
  private recording: {
    asr: Transcriber;
    /** The clip's samples; null for a live recording's (the clip's runs open the clip again). */
    audio: Float32Array | null;
    rec: Recording;
    /** The policy of its last run: the panel's requests reuse that run's session. */
    last?: { policy: PolicyName; budget: number };
  } | null = null;
  private readonly requests = new RequestsPanel((run, what) => void this.request(run, what));

  constructor(private readonly deps: AppDeps) {
    const cb = {
      onClip: (c: Clip) => void this.setClip(c),
      onError: (title: string, body: string) => this.show({ level: 'error', title, body }),
    };
    wireFileInput($('drop'), $<HTMLInputElement>('file-input'), cb);
    wireRecorder($<HTMLButtonElement>('record'), $('record-time'), cb);
    void wireSamples($<HTMLSelectElement>('sample-select'), $<HTMLButtonElement>('sample-use'), cb);
    this.ui.start.addEventListener('click', () => void this.run());
    this.ui.cancel.addEventListener('click', () => this.abort?.abort());
    this.ui.live.addEventListener('click', () => (this.liveRunning ? this.abort?.abort() : void this.live()));
    if (!canCapture()) {
      this.ui.live.disabled = true;
      this.ui.live.title = 'This browser cannot capture audio live (or the page is not served over https).';
    }
    this.ui.policy.addEventListener('change', () => (this.ui.budget.disabled = hasFixedBudget(this.ui.policy.value)));
    this.ui.backend.addEventListener('change', () => this.dropTranscriber());
    this.model = { url: deps.modelUrl, label: deps.modelLabel ?? 'the shipped model', local: false };
    this.calibration = new CalibratePanel({
      // A folder without heads loads for the full cache whatever the policy chosen; each run then asks for its own.
      transcriber: () => this.getTranscriber('full'),
      onBusy: (busy) => this.modelSource.setDisabled(busy || !!this.abort),
      // The transcriber holds the heads it made: WnW runs on it from now on.
      onCalibrated: () => (this.ui.status.textContent = 'Calibrated: WnW can run on this model.'),
      onError: (e) => this.show(describeError(e, this.context())),
    });
    this.modelSource = new ModelSource(
      this.model,
      {
        onModel: (m) => this.useModel(m),
        onError: (e) => this.show(describeError(e, this.context())),
        onSummary: (m, s) => void this.calibration.offer(m, s.config),
        // A buffer over an adapter limit cannot be made at all; the memory reported only bounds the device's.
        onTooBig: (v) =>
          this.show({
            level: 'error',
            code: 'MODEL_TOO_BIG',
            body: v.text,
            title: v.problems.some((p) => p.limit !== 'deviceMemory')
              ? 'This model does not fit this GPU as it is'
              : 'This model may not fit this device',
          }),
        // The first run of a click sizes the pool: in compare mode that is the full cache.
        context: () => ({
          seconds: this.audio ? this.audio.length / this.deps.sampleRate : 0,
          kv: this.ui.kv.value as KvPrecision,
          policy: this.plan()[0].policy,
          budget: this.plan()[0].budget,
          backend: this.ui.backend.value,
        }),
      },
      !!deps.modelLabel,
    );
    for (const c of [this.ui.kv, this.ui.policy, this.ui.budget, this.ui.backend, this.ui.compare])
      c.addEventListener('change', () => this.modelSource.refit());
    this.chart.reset(60);
    void this.describeBackend();
    const missing = webGpuMissing();
    if (missing) {
      this.ui.backend.value = 'cpu';
      this.show(missing);
    }
  }

  /** Says what WebGPU adapter exists before anything loads; after loading, the transcriber's own label replaces it. */
  private async describeBackend(): Promise<void> {
    const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
    if (!gpu) {
      this.ui.backendReadout.textContent = 'CPU (no WebGPU in this browser)';
      return;
    }
    try {
      const adapter = await gpu.requestAdapter();
      if (!adapter) throw new Error('no adapter');
      const i = adapter.info;
      const name = [i.vendor, i.architecture, i.description].filter(Boolean).join(' ') || 'unknown adapter';
      if (!this.transcriber) this.ui.backendReadout.textContent = `WebGPU available: ${name}`;
    } catch {
      this.ui.backendReadout.textContent = 'CPU (WebGPU present but no adapter)';
    }
  }

  private show(m: UiMessage | null): void {
    const n = this.ui.notice;
    if (!m) {
      n.hidden = true;
      n.replaceChildren();
      return;
    }
    n.className = `notice ${m.level}`;
    n.setAttribute('role', m.level === 'error' ? 'alert' : 'status');
    const h = document.createElement('h3');
    h.textContent = m.title;
    const body = document.createElement('p');
    // A folder from disk has an internal address; name it as the person chose it.
    body.textContent = this.model?.local
      ? m.body.split(this.model.url).join(`"${this.model.label.replace(/ \(.*$/, '')}/"`)
      : m.body;
    n.replaceChildren(h, body);
    n.dataset.code = m.code ?? '';
    if (m.hint) {
      const hint = document.createElement('p');
      hint.className = 'hint';
      hint.textContent = m.hint;
      n.append(hint);
    }
    if (m.action) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = m.action.label;
      const action = m.action;
      b.addEventListener('click', () => {
        if (action.kind === 'use-cpu') this.ui.backend.value = 'cpu';
        if (action.kind === 'lower-budget' && action.budget) {
          // In compare mode it is usually the full cache that does not fit: run WnW alone.
          this.ui.compare.checked = false;
          this.ui.policy.value = 'wnw';
          this.ui.budget.value = String(action.budget);
          this.ui.budget.disabled = false;
        }
        this.dropTranscriber();
        void this.run();
      });
      n.append(b);
    }
    n.hidden = false;
  }

  /** Another model folder: the next run loads it. */
  private useModel(m: ChosenModel): void {
    if (this.abort) return;
    this.show(null);
    this.model = m;
    this.calibration.hide();
    this.dropTranscriber();
    this.progress.reset(false);
    this.ui.backendReadout.textContent = 'not loaded yet';
  }

  private async setClip(clip: Clip): Promise<void> {
    if (this.abort) return; // a run is in progress: the controls say so
    this.show(null);
    this.clip = clip;
    this.audio = null;
    this.closeRecording();
    this.ui.start.disabled = true;
    this.ui.clip.hidden = false;
    this.ui.clipName.textContent = `${clip.name} — decoding…`;
    if (this.ui.clipAudio.src) URL.revokeObjectURL(this.ui.clipAudio.src);
    this.ui.clipAudio.src = URL.createObjectURL(clip.blob);
    this.ui.clipAudio.hidden = false;
    try {
      const audio = await this.deps.decode(clip.blob);
      if (this.clip !== clip) return;
      let peak = 0;
      for (let i = 0; i < audio.length; i += 16) peak = Math.max(peak, Math.abs(audio[i]));
      if (peak < 1e-4)
        throw Object.assign(new Error(`"${clip.name}" is silent: there is no sound to transcribe.`), {
          code: 'BAD_AUDIO',
        });
      this.audio = audio;
      this.ui.clipName.textContent =
        `${clip.name} — ${formatSeconds(audio.length / this.deps.sampleRate)}` +
        `${clip.reference ? ' (has a reference transcript: WER is shown)' : ''}`;
      this.ui.start.disabled = false;
      this.ui.status.textContent = 'Ready.';
      this.modelSource.refit();
    } catch (e) {
      if (this.clip !== clip) return;
      this.ui.clipName.textContent = `${clip.name} — cannot be used`;
      this.ui.clipAudio.hidden = true;
      this.show(describeError(e, this.context()));
    }
  }

  /** The clip's recording on `asr`, opened (encoded) on the first run and kept for the next ones. */
  private async recordingFor(asr: Transcriber, audio: Float32Array, signal: AbortSignal): Promise<Recording> {
    const r = this.recording;
    if (r && r.asr === asr && r.audio === audio) return r.rec;
    this.closeRecording();
    this.ui.status.textContent = 'Encoding the audio…';
    const rec = await asr.open(audio, { signal, onProgress: (e) => this.progress.update(e) });
    this.recording = { asr, audio, rec };
    return rec;
  }

  private closeRecording(): void {
    this.recording?.rec.dispose();
    this.recording = null;
    this.requests.reset();
  }

  /** A request of the requests panel on the open recording: one at a time, stopped by the page's Stop. */
  private async request(
    run: (rec: Recording, options: PanelOptions) => Promise<TranscriptionResult>,
    what: string,
  ): Promise<void> {
    const open = this.recording;
    if (!open || this.abort) return;
    const abort = (this.abort = new AbortController());
    this.show(null);
    this.setRunning(true);
    this.ui.status.textContent = `${what}…`;
    const t0 = performance.now();
    try {
      const r = await run(open.rec, { signal: abort.signal, ...open.last });
      const ms = performance.now() - t0;
      this.requests.answer(what, r, ms);
      this.ui.status.textContent = `Done: ${reuseLine(r, ms)}.`;
      if (r.error) this.show(describeError(r.error, this.context()));
    } catch (e) {
      this.show(describeError(e, this.context()));
      this.ui.status.textContent = 'Failed.';
    } finally {
      this.abort = null;
      this.setRunning(false);
    }
  }

  /**
   * Live captions from the microphone, with the chosen policy, until the Live button (or
   * Stop) ends them; the live recording's audio then stays open for the requests panel.
   * A failure keeps the committed text on screen.
   */
  private async live(): Promise<void> {
    if (this.abort) return;
    const abort = (this.abort = new AbortController());
    const stopped = new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve()));
    const run = this.plan()[0];
    this.show(null);
    this.liveRunning = true;
    this.setRunning(true);
    this.ui.live.textContent = '■ Stop live captions';
    this.ui.live.setAttribute('aria-pressed', 'true');
    const pane = new LivePane(`Live: ${run.title}`);
    this.ui.panes.replaceChildren(pane.root);
    this.ui.panes.classList.remove('two');
    let capture: Capture | null = null;
    /** The first append that failed (the live recording could not start, or its worker went). */
    let failure: unknown = null;
    try {
      this.ui.status.textContent = 'Loading the model…';
      const asr = await this.getTranscriber();
      if (abort.signal.aborted) {
        pane.failed('not started');
        this.ui.status.textContent = 'Stopped before the live captions started.';
        return;
      }
      const live = asr.live({ policy: run.policy, budget: run.budget, onText: (t) => pane.show(t) });
      try {
        capture = await captureMicrophone((chunk) => {
          // Not awaited: the microphone goes on while a tick runs, and the next tick covers all it heard.
          live.append(chunk).catch((e: unknown) => ((failure ??= e), abort.abort()));
          pane.heard(live.audioSeconds);
        });
      } catch (e) {
        // Frees the live recording the worker holds; it heard nothing.
        void live.stop().catch(() => {});
        pane.failed('no microphone');
        this.show({ level: 'error', ...microphoneRefused(e) });
        this.ui.status.textContent = 'Failed.';
        return;
      }
      this.ui.status.textContent = 'Listening: the captions follow every 2 s of audio.';
      await stopped;
      this.ui.live.disabled = true;
      await capture.stop();
      capture = null;
      this.ui.status.textContent = 'Stopping: a last hypothesis over all the audio…';
      // After a failed append the stop fails too, and frees the live recording the worker holds.
      const done = await live.stop().catch((e: unknown) => Promise.reject(failure ?? e));
      pane.finish(done);
      this.closeRecording();
      if (!done.recording) {
        // The text stays; the audio is past what one recording of this model holds.
        this.ui.status.textContent = `Done: ${formatSeconds(done.stats.audioSeconds)} of audio; not open for questions: ${done.recordingError?.message ?? 'it could not be opened'}`;
        return;
      }
      this.recording = { asr, audio: null, rec: done.recording, last: { policy: run.policy, budget: run.budget } };
      this.requests.showLive(done.recording);
      this.ui.status.textContent = `Done: ${formatSeconds(done.stats.audioSeconds)} of audio; the recording stays open below.`;
    } catch (e) {
      pane.failed('failed: see the message above (the committed text is kept)');
      // The notice's buttons retry a clip's transcription, not this.
      const { action: _retry, ...message } = describeError(e, this.context());
      this.show(message);
      this.ui.status.textContent = 'Failed.';
    } finally {
      await capture?.stop().catch(() => {});
      this.liveRunning = false;
      this.abort = null;
      this.setRunning(false);
      this.ui.live.textContent = '◉ Live captions';
      this.ui.live.setAttribute('aria-pressed', 'false');
    }
  }

  private context() {
    return { policy: this.ui.policy.value, budget: Number(this.ui.budget.value), backend: this.ui.backend.value };
  }

  private dropTranscriber(): void {
    this.closeRecording();
    const t = this.transcriber;
    this.transcriber = null;
    t?.asr.then(
      (a) => a.dispose(),
      () => {},
    );
  }

  /** The transcriber of the chosen (model, backend, KV precision), loaded for `policy` (default the first run's). */
  private getTranscriber(policy: PolicyName = this.plan()[0].policy): Promise<Transcriber> {
    const backend = this.ui.backend.value;
    const kvPrecision = this.ui.kv.value as KvPrecision;
    const model = this.model;
    const key = `${model.url}/${backend}/${kvPrecision}`;
    if (this.transcriber?.key !== key) {
      this.dropTranscriber();
      let fallback = '';
      const asr = this.deps.load(
        {
          model: model.url,
          backend: backend as LoadOptions['backend'],
          kvPrecision,
          // Each run passes its own policy; loading checks only what the first run needs
          // (a folder without heads.json loads for the full cache).
          policy,
          budget: 0.2,
          onProgress: (e) => {
            // A folder from disk counts the bytes its readers take, files' headers included; other
            // phases (and URLs) show the event's own bytes or pipeline count.
            const bytes = model.local && e.phase === 'download' ? localFolderBytes(model.url) : null;
            const read = bytes ? `${formatBytes(bytes.read)} of ${formatBytes(bytes.total)} read` : '';
            this.progress.update(e, read || undefined);
            if (e.detail) this.ui.status.textContent = `Loading the model: ${e.detail}${read ? ` (${read})` : ''}`;
            // 'auto' passes over software adapters (SwiftShader) and missing WebGPU: say why, once.
            if (e.detail && /using the CPU backend/.test(e.detail)) fallback = e.detail;
          },
        },
        model.local,
      );
      this.transcriber = { key, asr };
      asr.then(
        (a) => {
          this.ui.backendReadout.textContent = a.backend;
          if (fallback && this.ui.notice.hidden) this.show(fallbackNotice(fallback));
        },
        () => this.transcriber?.asr === asr && (this.transcriber = null),
      );
    }
    return this.transcriber!.asr;
  }

  private setRunning(running: boolean): void {
    this.ui.start.disabled = running || !this.audio;
    this.ui.live.disabled = (running && !this.liveRunning) || !canCapture();
    this.ui.cancel.disabled = !running;
    for (const c of [this.ui.policy, this.ui.backend, this.ui.kv, this.ui.compare]) c.disabled = running;
    this.modelSource.setDisabled(running || this.calibration.busy);
    this.requests.setBusy(running);
    this.ui.budget.disabled = running || hasFixedBudget(this.ui.policy.value);
    document.body.dataset.state = running ? 'running' : 'idle';
  }

  /** The runs of one click: the chosen policy, or the full cache then WnW side by side. */
  private plan(): { policy: PolicyName; budget: number; title: string; key: string }[] {
    const policy = this.ui.policy.value as PolicyName;
    const budget = Number(this.ui.budget.value);
    const label = (p: PolicyName, b: number) =>
      p === 'full'
        ? 'Full cache'
        : `${this.ui.policy.querySelector(`option[value="${p}"]`)?.textContent?.split(' — ')[0] ?? p} at ${Math.round(b * 100)} % GPU`;
    if (!this.ui.compare.checked) return [{ policy, budget, title: label(policy, budget), key: 'main' }];
    const other: PolicyName = policy === 'full' ? 'wnw' : policy;
    return [
      { policy: 'full', budget: 1, title: label('full', 1), key: 'full' },
      { policy: other, budget, title: label(other, budget), key: other },
    ];
  }

  async run(): Promise<void> {
    if (!this.audio || !this.clip || this.abort) return;
    const audio = this.audio;
    const clip = this.clip;
    const abort = (this.abort = new AbortController());
    this.show(null);
    this.setRunning(true);
    const runs = this.plan();
    const panes = runs.map((r) => new Pane(r.title, r.key));
    this.ui.panes.replaceChildren(...panes.map((p) => p.root));
    this.ui.panes.classList.toggle('two', panes.length > 1);
    try {
      this.ui.status.textContent = 'Loading the model…';
      const asr = await this.getTranscriber();
      this.progress.reset(true);
      const rec = await this.recordingFor(asr, audio, abort.signal);
      const results: TranscriptionResult[] = [];
      for (let i = 0; i < runs.length && !abort.signal.aborted; i++) {
        const r = await this.runOne(
          rec,
          audio,
          clip,
          runs[i],
          panes[i],
          abort.signal,
          runs.length > 1 ? ` (${i + 1} of ${runs.length})` : '',
        );
        results.push(r);
        if (r.error) break;
      }
      if (results.length === 2 && !results[1].error)
        this.ui.status.textContent = compareLine(results[0], results[1], this.deps.wer);
      const done = results.filter((r) => !r.error);
      if (done.length && this.recording?.rec === rec) {
        const last = done[done.length - 1];
        this.recording.last = { policy: last.stats.policy, budget: last.stats.budget };
        this.requests.show(rec, last);
      }
      if (!results.length && abort.signal.aborted) {
        // Stopped while the model was still loading: nothing was transcribed.
        panes.forEach((p) => p.failed('not run'));
        this.ui.status.textContent = 'Stopped before transcription started.';
      }
    } catch (e) {
      panes.forEach((p) => p.root.dataset.done || p.failed('not run'));
      // Advice (e.g. a lower budget) is about the run that failed, which in compare mode is not what the selectors say.
      const failed = runs[panes.findIndex((p) => p.root.dataset.done === 'failed')] ?? runs[0];
      this.show(describeError(e, { ...this.context(), policy: failed.policy, budget: failed.budget }));
      this.ui.status.textContent = 'Failed.';
    } finally {
      this.abort = null;
      this.setRunning(false);
    }
  }

  private async runOne(
    rec: Recording,
    audio: Float32Array,
    clip: Clip,
    run: { policy: PolicyName; budget: number; title: string },
    pane: Pane,
    signal: AbortSignal,
    suffix: string,
  ): Promise<TranscriptionResult> {
    const seconds = audio.length / this.deps.sampleRate;
    this.progress.reset(true);
    // The recording was encoded when it opened (this run or an earlier one).
    this.progress.update({ phase: 'encode', fraction: 1 });
    this.stats.clear();
    this.chart.reset(seconds);
    pane.start();
    this.ui.status.textContent = `Transcribing with ${run.title}${suffix}…`;
    const t0 = performance.now();
    let decodeStart = 0;
    let tokens = 0;
    let result: TranscriptionResult;
    try {
      // Every run on the clip shares the recording's encoding; a policy's run repeated reuses its prefill too.
      result = await rec.transcribe({
        policy: run.policy,
        budget: run.budget,
        signal,
        onProgress: (e) => {
          this.progress.update(e);
          if (e.phase === 'decode') this.stats.covered(e.fraction);
        },
        onToken: (text) => pane.append(text),
        onStep: (s) => {
          if (!decodeStart) decodeStart = performance.now();
          tokens++;
          this.chart.addStep(s);
          const now = performance.now();
          this.stats.step(s, tokens, now - decodeStart, now - t0, seconds);
        },
      });
    } catch (e) {
      pane.failed('failed: see the message above');
      throw e;
    }
    const score = clip.reference ? this.deps.wer(clip.reference, result.text) : null;
    pane.finish(result, score);
    this.stats.final(result);
    if (!result.error) {
      this.progress.update({ phase: 'decode', fraction: 1 });
      this.stats.covered(1);
    }
    if (result.error) {
      this.show(describeError(result.error, this.context()));
      this.ui.status.textContent =
        (result.error as { code?: string }).code === 'CANCELLED'
          ? 'Stopped; partial transcript kept.'
          : 'Stopped by an error; partial transcript kept.';
    } else {
      const ms = performance.now() - t0;
      this.ui.status.textContent = `Done${suffix}: ${result.stats.decodeSteps} tokens in ${(ms / 1000).toFixed(1)} s; ${reuseLine(result, ms)}.`;
    }
    return result;
  }
}
