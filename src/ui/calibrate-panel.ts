/**
 * "Calibrate for WnW": a folder the user chose (served or picked from disk) that has no
 * heads.json cannot run WnW, whose head triage comes from a calibration. The panel offers
 * the transcriber's own (`Transcriber.calibrate`: one forward a clip and its answer rows' backward, on the device and with
 * the weights the page transcribes with) on the site's calibration set or the user's clips,
 * states its cost before it starts, shows progress per clip with the time it expects, and
 * the result is stored in this browser beside the cached weights: the next visit finds it
 * and goes straight to WnW. Transcriptions asked for meanwhile run between clips.
 */
import { clipsFromFiles, forwardsPerClip, headsState, siteClips } from '../research.js';
import type { CalibrationProgress, ModelSummary, Transcriber } from '../index.js';
import { siteUrl } from './audio-input.js';
import type { ChosenModel } from './model-source.js';
import { formatSeconds } from './readouts.js';

export interface CalibratePanelCallbacks {
  /** The page's transcriber for the chosen model and backend (loaded on first use): the calibration runs on it. */
  transcriber(): Promise<Transcriber>;
  /** A calibration starts (true) or ends (false): the model choice stays as it is meanwhile. */
  onBusy(busy: boolean): void;
  /** The transcriber has its heads (and they were stored for the folder, or not). */
  onCalibrated(stored: boolean): void;
  onError(e: unknown): void;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** The site's calibration set (calibration-data/ of the repository, served beside the page). */
export const SITE_CALIBRATION = () => siteUrl('calibration-data/');

/** Clips among the chosen files: names with both a .wav and a .json (as clipsFromFiles pairs them). */
function ownClipCount(files: File[]): number {
  const names = (ext: RegExp) => new Set(files.filter((f) => ext.test(f.name)).map((f) => f.name.replace(ext, '')));
  const wav = names(/\.wav$/i);
  return [...names(/\.json$/i)].filter((n) => wav.has(n)).length;
}

export class CalibratePanel {
  private readonly ui = {
    root: $('calibrate'),
    state: $('calibrate-state'),
    offer: $('calibrate-offer'),
    count: $<HTMLSelectElement>('calibrate-count'),
    files: $<HTMLInputElement>('calibrate-files'),
    language: $<HTMLInputElement>('calibrate-language'),
    expect: $('calibrate-expect'),
    start: $<HTMLButtonElement>('calibrate-start'),
    stop: $<HTMLButtonElement>('calibrate-stop'),
    progress: $('calibrate-progress'),
    runBar: $<HTMLProgressElement>('calibrate-bar-run'),
    runText: $('calibrate-run-text'),
    download: $<HTMLAnchorElement>('calibrate-download'),
  };
  private model: { m: ChosenModel; config: ModelSummary['config'] } | null = null;
  private run: AbortController | null = null;
  private running = false;
  private seq = 0;

  constructor(private readonly cb: CalibratePanelCallbacks) {
    this.ui.start.addEventListener('click', () => void this.calibrate());
    this.ui.stop.addEventListener('click', () => this.run?.abort());
    // Choosing clip files is choosing to calibrate on them.
    this.ui.files.addEventListener('change', () => {
      const own = this.ui.root.querySelector<HTMLInputElement>('input[name="calibrate-source"][value="own"]');
      if (own && this.ui.files.files?.length) own.checked = true;
    });
    for (const c of [
      this.ui.count,
      this.ui.files,
      ...Array.from(this.ui.root.querySelectorAll('input[name="calibrate-source"]')),
    ]) {
      c.addEventListener('change', () => this.showExpectation());
    }
  }

  /** A calibration is under way (the model choice waits for it). */
  get busy(): boolean {
    return this.running;
  }

  /** Another model: nothing to offer until its config is read. */
  hide(): void {
    this.seq++;
    this.model = null;
    this.ui.root.hidden = true;
  }

  /** A chosen folder whose config was read: says where its heads come from, and offers a calibration where it has none. */
  async offer(m: ChosenModel, config: ModelSummary['config']): Promise<void> {
    const seq = ++this.seq;
    const state = await headsState(m.url).catch(() => 'none' as const);
    if (seq !== this.seq) return;
    this.model = { m, config };
    this.ui.root.hidden = false;
    this.ui.root.dataset.state = state;
    this.ui.progress.hidden = true;
    this.ui.download.hidden = true;
    this.ui.offer.hidden = state !== 'none';
    this.ui.state.textContent =
      state === 'folder'
        ? 'The folder has its heads.json: WnW runs with it.'
        : state === 'stored'
          ? 'Calibrated for WnW in this browser: the heads stored with the cached weights are used (no calibration needed).'
          : 'This folder has no heads.json, which WnW needs (which heads are anchors, tidal or fixed). ' +
            'Calibrate it here: the runtime ranks the heads itself from a few clips, ' +
            'and the result is stored in this browser for this folder. Until then, use the full cache.';
    this.showExpectation();
  }

  private source(): 'site' | 'own' {
    return (
      (this.ui.root.querySelector<HTMLInputElement>('input[name="calibrate-source"]:checked')?.value as
        'site' | 'own') ?? 'site'
    );
  }

  /** The cost before starting, in forwards of the decoder; their time is measured once the run begins. */
  private showExpectation(): void {
    if (!this.model) return;
    const c = this.model.config;
    const clips =
      this.source() === 'site' ? Number(this.ui.count.value) : ownClipCount(Array.from(this.ui.files.files ?? []));
    const per = forwardsPerClip(c, 'answer-path', 0);
    this.ui.expect.textContent =
      `Each clip costs ${per === 1 ? 'one teacher-forced forward' : `${per} teacher-forced forwards`} of the decoder (${c.numLayers} layers, whatever its ${c.numLayers * c.numKvHeads} KV heads) and a backward of its answer rows, ` +
      `${clips ? `${per * clips} forward${per * clips === 1 ? '' : 's'} for ${clips} clip${clips === 1 ? '' : 's'}` : 'times the clips'}, on the device and with the weights chosen above. ` +
      'Their time is measured on the first clip and shown as the run goes; transcriptions run between clips, and a stopped run resumes from its finished clips.';
  }

  private async calibrate(): Promise<void> {
    const target = this.model;
    if (!target || this.running) return;
    this.running = true;
    this.cb.onBusy(true);
    this.ui.start.disabled = true;
    this.ui.stop.disabled = false;
    this.ui.progress.hidden = false;
    this.ui.runBar.value = 0;
    this.ui.runText.textContent = 'loading the model…';
    this.ui.root.dataset.state = 'calibrating';
    try {
      const clips =
        this.source() === 'site'
          ? await siteClips(SITE_CALIBRATION(), Number(this.ui.count.value))
          : await clipsFromFiles(Array.from(this.ui.files.files ?? []));
      const language = this.ui.language.value.trim() || undefined;
      const run = (this.run = new AbortController());
      const asr = await this.cb.transcriber();
      this.ui.runText.textContent = `starting on ${asr.backend}…`;
      const r = await asr.calibrate(clips, {
        ...(language ? { language } : {}),
        signal: run.signal,
        onProgress: (p) => this.showProgress(p),
      });
      this.ui.runBar.value = 1;
      this.ui.root.dataset.state = r.stored ? 'stored' : 'unstored';
      this.ui.offer.hidden = r.stored;
      this.ui.state.textContent = r.stored
        ? `Calibrated for WnW in ${formatSeconds(r.seconds)}: the heads are stored in this browser with the cached weights, and WnW uses them from now on.`
        : `Calibrated in ${formatSeconds(r.seconds)}, but this browser cannot store the result ` +
          '(no private storage, or a folder it cannot identify): save heads.json into the folder.';
      if (this.ui.download.href) URL.revokeObjectURL(this.ui.download.href);
      this.ui.download.href = URL.createObjectURL(
        new Blob([JSON.stringify(r.heads, null, 1) + '\n'], { type: 'application/json' }),
      );
      this.ui.download.hidden = false;
      this.cb.onCalibrated(r.stored);
    } catch (e) {
      this.ui.root.dataset.state = 'none';
      const stopped = (e as { code?: string }).code === 'CANCELLED';
      this.ui.runText.textContent = stopped
        ? 'stopped: the finished clips are kept, and the next run resumes from them'
        : 'failed';
      if (!stopped) this.cb.onError(e);
    } finally {
      this.run = null;
      this.running = false;
      this.ui.start.disabled = false;
      this.ui.stop.disabled = true;
      this.cb.onBusy(false);
    }
  }

  private showProgress(p: CalibrationProgress): void {
    this.ui.runBar.value = p.fraction;
    const left =
      p.fraction >= 1
        ? 'writing heads.json…'
        : p.secondsLeft === null
          ? 'timing the first forward…'
          : `about ${formatSeconds(p.secondsLeft)} left`;
    const kept = p.finished?.reused ? ' · kept from the stopped run' : '';
    this.ui.runText.textContent = `clip ${p.clip} of ${p.clips} (${p.id})${kept} · ${Math.round(p.fraction * 100)} % · ${left}`;
    this.ui.runText.dataset.clip = String(p.clip);
  }
}
