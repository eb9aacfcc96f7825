/**
 * Where each policy stands, at a glance: top-1 agreement with the full cache and WER
 * against the full cache's transcript, each against the measured r_GPU, one line per
 * policy through its budgets, one pair of panels per eval set. Plain SVG text from the
 * report's summary rows, so the docs show it and a test reads it.
 *
 *   npm run eval -- ... --plot FILE.svg
 *   npm run plot -- eval/espeak-heldout.json [eval/long-4min.json ...] --out FILE.svg
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFile, writeFile } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { EvalReport, SummaryRow } from './report.js';

export interface PlotSet {
  title: string;
  summary: SummaryRow[];
}

/** One colour per policy, in the registry's order; variants (ablations) are left out of the picture. */
const COLOURS: Record<string, string> = {
  wnw: '#d62728',
  quest: '#1f77b4',
  arkvale: '#2ca02c',
  snapkv: '#9467bd',
  adakv: '#8c564b',
  audiokv: '#e377c2',
  h2o: '#7f7f7f',
  streaming: '#bcbd22',
};

const W = 300;
const H = 220;
const M = { left: 46, right: 12, top: 28, bottom: 38 };

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Panel {
  title: string;
  yLabel: string;
  y: (r: SummaryRow) => number | null;
  yMax: number;
}

function panel(x0: number, y0: number, p: Panel, rows: SummaryRow[]): string {
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const sx = (v: number) => x0 + M.left + (v / 0.5) * pw;
  const sy = (v: number) => y0 + M.top + ph - (Math.min(v, p.yMax) / p.yMax) * ph;
  const out: string[] = [];
  out.push(`<text x="${x0 + M.left}" y="${y0 + 16}" font-size="12" font-weight="bold">${esc(p.title)}</text>`);
  out.push(`<rect x="${x0 + M.left}" y="${y0 + M.top}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`);
  for (const t of [0, 0.1, 0.2, 0.3, 0.4, 0.5]) {
    out.push(`<line x1="${sx(t)}" y1="${y0 + M.top + ph}" x2="${sx(t)}" y2="${y0 + M.top + ph + 4}" stroke="#444"/>`);
    out.push(
      `<text x="${sx(t)}" y="${y0 + M.top + ph + 15}" font-size="10" text-anchor="middle">${t.toFixed(1)}</text>`,
    );
  }
  for (let i = 0; i <= 4; i++) {
    const v = (p.yMax * i) / 4;
    out.push(`<line x1="${x0 + M.left}" y1="${sy(v)}" x2="${x0 + M.left + pw}" y2="${sy(v)}" stroke="#ddd"/>`);
    out.push(
      `<text x="${x0 + M.left - 4}" y="${sy(v) + 3}" font-size="10" text-anchor="end">${p.yMax > 1 ? v.toFixed(0) : v.toFixed(2)}</text>`,
    );
  }
  out.push(
    `<text x="${x0 + M.left + pw / 2}" y="${y0 + H - 6}" font-size="10" text-anchor="middle">measured r_GPU</text>`,
  );
  out.push(
    `<text x="${x0 + 11}" y="${y0 + M.top + ph / 2}" font-size="10" text-anchor="middle" ` +
      `transform="rotate(-90 ${x0 + 11} ${y0 + M.top + ph / 2})">${esc(p.yLabel)}</text>`,
  );
  const byPolicy = new Map<string, SummaryRow[]>();
  for (const r of rows) {
    if (r.policy === 'full' || r.variant || p.y(r) === null) continue;
    byPolicy.set(r.policy, [...(byPolicy.get(r.policy) ?? []), r]);
  }
  for (const [policy, rs] of byPolicy) {
    const c = COLOURS[policy] ?? '#000';
    const pts = rs.sort((a, b) => a.rGpu - b.rGpu).map((r) => [sx(r.rGpu), sy(p.y(r)!)] as const);
    const wide = policy === 'wnw' ? 2.5 : 1.2;
    out.push(
      `<polyline points="${pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" fill="none" stroke="${c}" stroke-width="${wide}"/>`,
    );
    for (const [x, y] of pts)
      out.push(
        `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${policy === 'wnw' ? 3.5 : 2.5}" fill="${c}">` +
          `<title>${esc(policy)}</title></circle>`,
      );
  }
  return out.join('\n');
}

/** The SVG: per set, agreement and WER vs full against measured r_GPU; a legend of the policies drawn. */
export function fidelityPlot(sets: PlotSet[]): string {
  const width = 2 * W;
  const legendH = 22;
  const height = sets.length * H + legendH;
  const parts: string[] = [];
  sets.forEach((s, i) => {
    const y0 = legendH + i * H;
    parts.push(
      panel(
        0,
        y0,
        { title: `${s.title}: agreement`, yLabel: 'top-1 agreement', y: (r) => r.agreement, yMax: 1 },
        s.summary,
      ),
    );
    parts.push(
      panel(
        W,
        y0,
        {
          title: `${s.title}: WER vs full`,
          yLabel: 'WER vs full %',
          y: (r) => (r.werVsFull === null ? null : r.werVsFull * 100),
          yMax: 120,
        },
        s.summary,
      ),
    );
  });
  const drawn = Object.keys(COLOURS).filter((p) =>
    sets.some((s) => s.summary.some((r) => r.policy === p && !r.variant)),
  );
  drawn.forEach((p, i) => {
    const x = 10 + i * 72;
    parts.push(
      `<rect x="${x}" y="6" width="10" height="10" fill="${COLOURS[p]}"/><text x="${x + 14}" y="15" font-size="11">${esc(p)}</text>`,
    );
  });
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">\n` +
    `<rect width="100%" height="100%" fill="white"/>\n${parts.join('\n')}\n</svg>\n`
  );
}

/** `npm run plot -- REPORT.json [REPORT.json ...] --out FILE.svg`: the picture from stored reports. */
export async function main(argv = process.argv.slice(2)): Promise<number> {
  const i = argv.indexOf('--out');
  const out = i >= 0 ? argv[i + 1] : undefined;
  const files = argv.filter((a, j) => a !== '--out' && j !== i + 1);
  if (!out || files.length === 0) {
    process.stderr.write('usage: npm run plot -- REPORT.json [REPORT.json ...] --out FILE.svg\n');
    return 2;
  }
  const sets: PlotSet[] = [];
  for (const f of files) {
    const report = JSON.parse(await readFile(resolve(f), 'utf8')) as EvalReport;
    sets.push({ title: basename(f, '.json'), summary: report.summary });
  }
  await writeFile(resolve(out), fidelityPlot(sets));
  process.stderr.write(`plot: wrote ${out}\n`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().then((code) => process.exit(code));
}
