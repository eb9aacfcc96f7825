/**
 * The tide chart: one row per decode step (newest at the bottom, older rows scroll up),
 * one column per 2-s audio segment. A cell's colour is the share of tidal heads that
 * hold the segment on the GPU at that step (dark = only on CPU, teal = on GPU for every
 * tidal head); amber marks where the anchor heads attend, so one can watch the GPU
 * window follow the transcript through the audio.
 */
import type { StepStats } from '../index.js';

const ROW = 3; // px per decode step at devicePixelRatio 1
const AXIS = 18; // px for the time axis under the plot
const OFF: [number, number, number] = [30, 41, 59]; // segment not on the GPU for any tidal head
const ON: [number, number, number] = [20, 184, 166]; // segment on the GPU for every tidal head
const EMPTY = '#0f172a';
const ANCHOR = '251, 191, 36'; // amber, drawn with alpha = attention share

export function tideColour(share: number): string {
  const t = Math.max(0, Math.min(1, Number.isFinite(share) ? share : 0));
  const c = OFF.map((o, i) => Math.round(o + (ON[i] - o) * t));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

export class TideChart {
  private readonly ctx: CanvasRenderingContext2D;
  private segments = 0;
  private segmentSeconds = 2;
  private rows = 0;
  private dpr = 1;

  constructor(readonly canvas: HTMLCanvasElement) {
    const ctx = canvas.getContext('2d');
    if (!ctx) throw new Error('2D canvas is not available');
    this.ctx = ctx;
  }

  /** Clears the chart for a clip of `audioSeconds`; the segment count is corrected by the first step that carries arrays. */
  reset(audioSeconds: number, segmentSeconds = 2): void {
    this.segmentSeconds = segmentSeconds;
    this.segments = Math.max(1, Math.ceil(audioSeconds / segmentSeconds));
    this.rows = 0;
    this.canvas.dataset.rows = '0';
    this.resize();
    this.clear();
  }

  /** Steps drawn since the last reset (the e2e test reads it from data-rows). */
  get drawnRows(): number {
    return this.rows;
  }

  private resize(): void {
    this.dpr = Math.max(1, Math.round(globalThis.devicePixelRatio || 1));
    const w = Math.max(200, Math.floor(this.canvas.clientWidth || 600));
    const h = Math.max(120, Math.floor(this.canvas.clientHeight || 240));
    this.canvas.width = w * this.dpr;
    this.canvas.height = h * this.dpr;
    // The e2e test measures ink over the plot (above the time axis) and compares it with the rows drawn.
    this.canvas.dataset.plotHeight = String(this.plotHeight);
    this.canvas.dataset.rowHeight = String(ROW * this.dpr);
  }

  private get plotHeight(): number {
    return this.canvas.height - AXIS * this.dpr;
  }

  private clear(): void {
    const { ctx, canvas } = this;
    ctx.fillStyle = EMPTY;
    ctx.fillRect(0, 0, canvas.width, this.plotHeight);
    ctx.fillStyle = '#64748b';
    ctx.font = `${13 * this.dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText('Decode steps appear here', canvas.width / 2, this.plotHeight / 2);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, this.plotHeight, canvas.width, AXIS * this.dpr);
    this.drawAxis();
  }

  private drawAxis(): void {
    const { ctx, canvas, dpr } = this;
    const seconds = this.segments * this.segmentSeconds;
    // About one label per 90 px, on a round number of seconds.
    const target = seconds / Math.max(1, canvas.width / dpr / 90);
    const step = [2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800].find((s) => s >= target) ?? 3600;
    ctx.fillStyle = '#334155';
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = 'top';
    for (let t = 0; t <= seconds; t += step) {
      const x = (t / seconds) * canvas.width;
      ctx.fillRect(x, this.plotHeight, dpr, 4 * dpr);
      const label = t >= 60 ? `${Math.floor(t / 60)}:${String(t % 60).padStart(2, '0')}` : `${t}s`;
      ctx.textAlign = x < 20 * dpr ? 'left' : x > canvas.width - 20 * dpr ? 'right' : 'center';
      ctx.fillText(label, x, this.plotHeight + 5 * dpr);
    }
  }

  /** Draws one decode step as a new bottom row. Without tidal data (e.g. the full cache) every segment counts as on the GPU. */
  addStep(s: StepStats): void {
    const n = s.tidalSegments?.length ?? s.anchorAttention?.length ?? this.segments;
    if (n !== this.segments && n > 0) {
      this.segments = n;
      if (this.rows === 0) this.clear();
    }
    const { ctx, canvas, dpr } = this;
    const rowH = ROW * dpr;
    const h = this.plotHeight;
    if (this.rows === 0) {
      // The placeholder goes with the first row: scrolled up, it would stay over the rows drawn.
      ctx.fillStyle = EMPTY;
      ctx.fillRect(0, 0, canvas.width, h);
    }
    // Scroll the plot up by one row; the canvas copies onto itself.
    ctx.drawImage(canvas, 0, rowH, canvas.width, h - rowH, 0, 0, canvas.width, h - rowH);
    const y = h - rowH;
    const w = canvas.width / this.segments;
    for (let i = 0; i < this.segments; i++) {
      ctx.fillStyle = tideColour(s.tidalSegments ? s.tidalSegments[i] : 1);
      // Cells overlap by a pixel so sub-pixel widths (an hour is 1,800 segments) leave no seams.
      ctx.fillRect(Math.floor(i * w), y, Math.ceil(w) + 1, rowH);
    }
    const a = s.anchorAttention;
    if (a && a.length) {
      let sum = 0;
      for (let i = 0; i < a.length; i++) sum += a[i];
      if (sum > 0) {
        // Opaque where a segment draws 8x its uniform share: a focused anchor shows as a bright
        // track, attention spread evenly over the audio stays a faint wash.
        const scale = a.length / (8 * sum);
        for (let i = 0; i < a.length && i < this.segments; i++) {
          const alpha = Math.min(1, a[i] * scale);
          if (alpha < 0.1) continue;
          ctx.fillStyle = `rgba(${ANCHOR}, ${alpha.toFixed(2)})`;
          ctx.fillRect(Math.floor(i * w + w * 0.25), y, Math.max(dpr, Math.ceil(w * 0.5)), rowH);
        }
      }
    }
    this.rows++;
    this.canvas.dataset.rows = String(this.rows);
  }
}
