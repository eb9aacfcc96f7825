/**
 * "Use a model folder": the shipped model, a folder the site serves (a URL), or a folder
 * on the user's disk (a directory input). A picked folder is read where the page runs:
 * its Files are served through src/model/files.ts by `wnw-files://` addresses, sliced
 * range by range as the loader asks, so nothing is uploaded and no shard is read whole.
 * Before any weight is read the panel shows what the folder holds and whether it fits.
 */
import {
  checkFit,
  fitDevice,
  inspectModel,
  openLocalFolder,
  releaseLocalFolder,
  type FitDevice,
  type FitOptions,
  type FitVerdict,
  type ModelSummary,
} from '../index.js';
import { formatBytes, formatSeconds } from './readouts.js';

export interface ChosenModel {
  /** What LoadOptions.model gets: a URL or a `wnw-files://` address. */
  url: string;
  label: string;
  /** A folder from the user's disk: its Files live in this page, so it loads here, not in a worker. */
  local: boolean;
}

export interface ModelSourceCallbacks {
  onModel(m: ChosenModel): void;
  onError(e: unknown): void;
  /** The chosen folder's config was read (not for the shipped model): the calibration panel's cue. */
  onSummary?(m: ChosenModel, s: ModelSummary): void;
  /** The verdict of a folder that does not fit (shown as a notice, loading is still allowed). */
  onTooBig(v: FitVerdict): void;
  /** Seconds of the current clip (0: none yet), the KV precision, the first run's policy and budget, and the backend. */
  context(): Required<Pick<FitOptions, 'kv' | 'policy' | 'budget'>> & { seconds: number; backend: string };
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
/** Without a clip the fit is judged for a minute of audio. */
const DEFAULT_SECONDS = 60;

export class ModelSource {
  private readonly ui = {
    name: $('model-name'),
    shipped: $<HTMLButtonElement>('model-shipped'),
    form: $<HTMLFormElement>('model-url-form'),
    url: $<HTMLInputElement>('model-url'),
    dir: $<HTMLInputElement>('model-dir'),
    info: $('model-info'),
    fit: $('model-fit'),
  };
  private summary: ModelSummary | null = null;
  /** The WebGPU adapter's limits (null: no adapter, the CPU backend runs) and the memory the browser reports, asked once. */
  private readonly device: Promise<FitDevice> = fitDevice();
  private localBase = '';
  private seq = 0;

  private readonly shippedUrl: string;

  /** `initial`: the model the page starts with (the shipped one, or `?model=`, which `describeInitial` describes at once). */
  constructor(
    initial: ChosenModel,
    private readonly cb: ModelSourceCallbacks,
    describeInitial = false,
  ) {
    this.shippedUrl = initial.url;
    this.ui.name.textContent = initial.label;
    this.ui.shipped.textContent = `Use ${initial.label}`;
    this.ui.shipped.addEventListener('click', () => void this.choose(initial));
    this.ui.form.addEventListener('submit', (e) => {
      e.preventDefault();
      const v = this.ui.url.value.trim();
      if (!v) return;
      const url = new URL(v.endsWith('/') ? v : `${v}/`, location.href).href;
      void this.choose({ url, label: v, local: false });
    });
    this.ui.dir.addEventListener('change', () => {
      const list = this.ui.dir.files;
      if (!list?.length) return;
      void openLocalFolder(Array.from(list)).then(
        (f) =>
          this.choose({
            url: f.model,
            label: `${f.name} (${f.files} files, ${formatBytes(f.bytes)}, from this computer)`,
            local: true,
          }),
        (e: unknown) => this.cb.onError(e),
      );
    });
    // A folder given by the page's address is a served folder like one typed in: its summary (and the calibration offer, where it has no heads) show at once.
    if (describeInitial) void this.choose(initial, true);
  }

  /** Reads the folder's config (no weights), shows what it holds, then hands it to the page. */
  private async choose(m: ChosenModel, describe = false): Promise<void> {
    const seq = ++this.seq;
    if (this.localBase && this.localBase !== m.url) releaseLocalFolder(this.localBase);
    this.localBase = m.local ? m.url : '';
    this.ui.name.textContent = m.label;
    this.ui.shipped.hidden = m.url === this.shippedUrl;
    this.summary = null;
    this.ui.info.hidden = true;
    this.ui.fit.hidden = true;
    this.cb.onModel(m);
    if (m.url === this.shippedUrl && !describe) return;
    try {
      const s = await inspectModel(m.url);
      if (seq !== this.seq) return;
      this.summary = s;
      this.showSummary(s, m.local);
      this.refit();
      this.cb.onSummary?.(m, s);
    } catch (e) {
      if (seq !== this.seq) return;
      this.cb.onError(e);
    }
  }

  private showSummary(s: ModelSummary, local: boolean): void {
    const c = s.config;
    const rows: [string, string, string][] = [
      ['family', 'Family', s.family],
      [
        'layers',
        'Layers',
        `${c.numLayers} (hidden ${c.hiddenSize}, ${c.numHeads} heads / ${c.numKvHeads} KV heads of ${c.headDim})`,
      ],
      ['format', 'Weight format', `${s.weightFormat}${s.tied ? ', tied embedding' : ''}`],
      ['weights', 'Decoder weights', formatBytes(s.weightBytes)],
      [
        'runs',
        'Runs',
        local
          ? 'in this page (a folder from disk is read here, not in the background worker)'
          : 'in the background worker',
      ],
    ];
    this.ui.info.replaceChildren(
      ...rows.flatMap(([key, k, v]) => {
        const dt = document.createElement('dt');
        dt.textContent = k;
        const dd = document.createElement('dd');
        dd.textContent = v;
        dd.dataset.key = key;
        return [dt, dd];
      }),
    );
    this.ui.info.hidden = false;
  }

  /** While a run loads or uses the model, the model stays as it is. */
  setDisabled(disabled: boolean): void {
    for (const c of [this.ui.shipped, this.ui.url, this.ui.dir, ...Array.from(this.ui.form.querySelectorAll('button'))])
      c.disabled = disabled;
  }

  /** Re-judges the fit for the current clip, KV precision, budget and backend (called when any changes). */
  refit(): void {
    const s = this.summary;
    if (!s) return;
    const seq = this.seq;
    void this.device.then((device) => {
      if (seq !== this.seq || this.summary !== s) return;
      const { seconds, backend, ...run } = this.cb.context();
      const secs = seconds > 0 ? seconds : Math.min(DEFAULT_SECONDS, s.maxAudioSeconds);
      let v: FitVerdict;
      try {
        v = checkFit(s, { seconds: secs, ...run, device: backend === 'cpu' ? { ...device, limits: null } : device });
      } catch (e) {
        // A clip past the model's positions: the run would be refused the same way.
        this.ui.fit.hidden = true;
        this.cb.onError(e);
        return;
      }
      this.ui.fit.textContent = `For ${seconds > 0 ? 'this clip' : 'a clip'} of ${formatSeconds(secs)}: ${v.text}`;
      this.ui.fit.dataset.fits = v.fits === null ? 'unknown' : String(v.fits);
      this.ui.fit.hidden = false;
      if (v.fits === false) this.cb.onTooBig(v);
    });
  }
}
