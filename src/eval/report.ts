/**
 * The eval report: the JSON shape other tools (and the tables in docs/evaluation.md) read, the pooled
 * summary, and the markdown table. Pure functions, so they are tested without a model.
 * The field names are a contract: add fields, never rename them.
 */
import { pooledWer } from './wer.js';

export interface RunRecord {
  policy: string;
  /** Ablation options the policy ran with, as written (`ranking=voice`); absent for the method's defaults. */
  variant?: string;
  /** Target r_GPU; 1 for the full cache (it keeps everything). */
  budget: number;
  text: string;
  wer: number;
  rGpu: number;
  /** The largest r_GPU of any decode step (absent in reports from before it was recorded). */
  rGpuPeak?: number;
  rGpuCpu: number;
  mbPerStep: number;
  msPerToken: number;
  decodeSteps: number;
  /** The policy's plan lag on this clip (TranscriptionStats.planLag; absent in reports from before it was recorded). */
  planLag?: 1 | 2;
  stoppedBy?: string;
  /** Set when the run failed or was cut short; `text` is then the partial transcript. */
  error?: string;
  /**
   * Fidelity to the full cache, on every run but the full cache's own (absent with --no-full;
   * null when the full run or the teacher-forced decode failed). werVsFull: WER against the
   * full cache's transcript of the clip. agreement and klVsFull: the full cache's tokens
   * decoded under this policy's cache, the share of steps whose greedy token is the full
   * cache's and the mean KL(full ‖ policy) per step, in nats.
   */
  werVsFull?: number | null;
  agreement?: number | null;
  klVsFull?: number | null;
  /**
   * Teacher-forced, the mean over steps of log p(stop) under this policy's cache minus
   * under the full cache's, for the stop token the full cache ended on (nats; > 0: the
   * policy pushes the model towards stopping). Null when the full cache ran to the length
   * guard.
   */
  stopShift?: number | null;
  /**
   * Teacher-forced, the share of the full cache's audio attention mass on positions this
   * policy had on the GPU at that step (eval/coverage.ts), mean over heads and sampled
   * steps, and per KV head.
   */
  attentionCovered?: number | null;
  attentionCoveredByHead?: number[];
  /** Steps the teacher-forced comparison covered (weights the pooled agreement and KL). */
  forcedSteps?: number;
  /** Why the teacher-forced comparison is missing. */
  fidelityError?: string;
}

export interface ClipRecord {
  id: string;
  audioSeconds: number;
  reference: string;
  /** The target-language reference of a translation run (--task translate); WER is then against it. */
  translation?: string;
  runs: RunRecord[];
}

export interface SummaryRow {
  policy: string;
  variant?: string;
  budget: number;
  /** Pooled over clips: total word errors / total reference words (after 1.2x truncation). */
  wer: number;
  rGpu: number;
  /** The largest per-step r_GPU over the clips (null where no run recorded it). */
  rGpuPeak?: number | null;
  rGpuCpu: number;
  mbPerStep: number;
  msPerToken: number;
  /** Decode steps over the full cache's on the same clips (null for the full row and without a full run): below 1, the policy stops early. */
  stepsVsFull?: number | null;
  /** msPerToken divided by the full cache's, measured in the same run (null without a full run). */
  msPerTokenVsFull: number | null;
  /** Pooled WER against the full cache's transcripts (null for the full row and without them). */
  werVsFull: number | null;
  /** Teacher-forced top-1 agreement and mean KL(full ‖ policy), pooled over all compared steps. */
  agreement: number | null;
  klVsFull: number | null;
  /** Mean stop-token shift (RunRecord.stopShift), pooled over the steps of clips where the full cache stopped. */
  stopShift?: number | null;
  /** Attention covered (RunRecord.attentionCovered), mean over the clips that measured it. */
  attentionCovered?: number | null;
  clips: number;
}

export interface EvalReport {
  /** Corpus BLEU per (policy, budget) of a translation run (--task translate), sacreBLEU's default settings. */
  bleu?: { policy: string; variant?: string; budget: number; bleu: number }[];
  /** kv: the pool's key/value precision (absent in reports from before it was an option: f32). */
  meta?: {
    model: string;
    backend: string;
    kv?: string;
    date: string;
    data: string;
    /** The command that wrote the report (absent in reports from before it was recorded). */
    command?: string;
    /** The teacher-forced decodes ran as a recording's second request (--second-request). */
    secondRequest?: boolean;
    /** Runs re-run after the report was first written (mergeReports): which rows, when, by what command. */
    updates?: { date: string; command?: string; rows: string[] }[];
  };
  clips: ClipRecord[];
  summary: SummaryRow[];
}

/** The full cache ignores the budget; it is filed under budget 1 so every key is (policy, budget). */
export const FULL_BUDGET = 1;

const key = (r: { policy: string; variant?: string; budget: number }) => `${r.policy}:${r.variant ?? ''}@${r.budget}`;

/**
 * One row per (policy, variant, budget), in first-seen order with 'full' first.
 * rGpu and rGpuCpu are plain means over clips (each clip's own mean over steps);
 * msPerToken and mbPerStep are weighted by decode steps, i.e. total time (or bytes)
 * over total steps, so a long clip counts for what it cost.
 */
export function summarise(clips: ClipRecord[]): SummaryRow[] {
  const groups = new Map<
    string,
    {
      policy: string;
      variant?: string;
      budget: number;
      runs: { run: RunRecord; reference: string; full?: string; fullSteps?: number }[];
    }
  >();
  for (const clip of clips) {
    const fullRun = clip.runs.find((r) => r.policy === 'full' && !r.variant && !r.error);
    for (const run of clip.runs) {
      const k = key(run);
      let g = groups.get(k);
      if (!g)
        groups.set(
          k,
          (g = { policy: run.policy, ...(run.variant ? { variant: run.variant } : {}), budget: run.budget, runs: [] }),
        );
      g.runs.push({
        run,
        reference: clip.translation ?? clip.reference,
        full: fullRun?.text,
        fullSteps: fullRun?.decodeSteps,
      });
    }
  }
  const rows: SummaryRow[] = [];
  for (const g of groups.values()) {
    const n = g.runs.length;
    const steps = g.runs.reduce((s, r) => s + r.run.decodeSteps, 0);
    const weighted = (f: (r: RunRecord) => number) =>
      steps > 0
        ? g.runs.reduce((s, r) => s + f(r.run) * r.run.decodeSteps, 0) / steps
        : mean(g.runs.map((r) => f(r.run)));
    rows.push({
      policy: g.policy,
      ...(g.variant ? { variant: g.variant } : {}),
      budget: g.budget,
      wer: pooledWer(g.runs.map((r) => ({ reference: r.reference, hypothesis: r.run.text }))),
      rGpu: mean(g.runs.map((r) => r.run.rGpu)),
      rGpuPeak: g.runs.some((r) => r.run.rGpuPeak !== undefined)
        ? Math.max(...g.runs.map((r) => r.run.rGpuPeak ?? 0))
        : null,
      rGpuCpu: mean(g.runs.map((r) => r.run.rGpuCpu)),
      stepsVsFull: stepsVsFull(g.policy, g.runs),
      attentionCovered: meanOrNull(g.runs.map((r) => r.run.attentionCovered)),
      mbPerStep: weighted((r) => r.mbPerStep),
      msPerToken: weighted((r) => r.msPerToken),
      msPerTokenVsFull: null,
      ...pooledFidelity(g.runs),
      clips: n,
    });
  }
  const full = rows.find((r) => r.policy === 'full' && !r.variant);
  for (const r of rows) r.msPerTokenVsFull = full && full.msPerToken > 0 ? r.msPerToken / full.msPerToken : null;
  return rows.sort((a, b) => (a.policy === 'full' ? -1 : b.policy === 'full' ? 1 : 0));
}

/**
 * WER against the full cache's transcripts, pooled like WER; agreement and KL weighted
 * by the steps each clip compared. Runs without a measurement (null) are left out.
 */
function pooledFidelity(
  runs: { run: RunRecord; full?: string }[],
): Pick<SummaryRow, 'werVsFull' | 'agreement' | 'klVsFull' | 'stopShift'> {
  const vsFull = runs.filter((r) => r.run.werVsFull != null && r.full !== undefined);
  const forced = runs
    .map((r) => r.run)
    .filter((r) => r.agreement != null && r.klVsFull != null && (r.forcedSteps ?? 0) > 0);
  const steps = forced.reduce((s, r) => s + r.forcedSteps!, 0);
  const stopped = forced.filter((r) => r.stopShift != null);
  const stopSteps = stopped.reduce((s, r) => s + r.forcedSteps!, 0);
  return {
    werVsFull: vsFull.length ? pooledWer(vsFull.map((r) => ({ reference: r.full!, hypothesis: r.run.text }))) : null,
    agreement: steps ? forced.reduce((s, r) => s + r.agreement! * r.forcedSteps!, 0) / steps : null,
    klVsFull: steps ? forced.reduce((s, r) => s + r.klVsFull! * r.forcedSteps!, 0) / steps : null,
    stopShift: stopSteps ? stopped.reduce((s, r) => s + r.stopShift! * r.forcedSteps!, 0) / stopSteps : null,
  };
}

/** Σ decode steps / Σ the full cache's, over the clips with a full run. */
function stepsVsFull(policy: string, runs: { run: RunRecord; fullSteps?: number }[]): number | null {
  const paired = runs.filter((r) => r.fullSteps !== undefined && !r.run.error);
  const full = paired.reduce((a, r) => a + r.fullSteps!, 0);
  return policy === 'full' || !full ? null : paired.reduce((a, r) => a + r.run.decodeSteps, 0) / full;
}

function meanOrNull(xs: (number | null | undefined)[]): number | null {
  const got = xs.filter((x): x is number => x != null);
  return got.length ? mean(got) : null;
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

const fmt = (x: number | null, digits: number) => (x === null || !Number.isFinite(x) ? '–' : x.toFixed(digits));
const signed = (x: number | null) => (x === null || !Number.isFinite(x) ? '–' : `${x >= 0 ? '+' : ''}${x.toFixed(2)}`);

/** The table printed by `npm run eval` and written into a doc's block (docs/evaluation.md). */
export function markdownTable(summary: SummaryRow[]): string {
  const lines = [
    '| policy | budget | WER % | WER vs full % | agreement | KL vs full | stop shift | steps vs full | attn covered | ' +
      'r_GPU | r_GPU peak | r_GPU+CPU | CPU→GPU MB/step | ms/token | vs full | clips |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of summary) {
    lines.push(
      `| ${r.variant ? `${r.policy} (${r.variant.replaceAll(':', ', ')})` : r.policy} | ` +
        `${r.policy === 'full' ? '–' : fmt(r.budget, 2)} | ${fmt(r.wer * 100, 2)} | ` +
        `${fmt(r.werVsFull === null ? null : r.werVsFull * 100, 2)} | ${fmt(r.agreement, 3)} | ${fmt(r.klVsFull, 3)} | ` +
        `${signed(r.stopShift ?? null)} | ${fmt(r.stepsVsFull ?? null, 2)} | ${fmt(r.attentionCovered ?? null, 3)} | ` +
        `${fmt(r.rGpu, 3)} | ${fmt(r.rGpuPeak ?? null, 3)} | ${fmt(r.rGpuCpu, 3)} | ${fmt(r.mbPerStep, 3)} | ` +
        `${fmt(r.msPerToken, 1)} | ${fmt(r.msPerTokenVsFull, 2)}× | ${r.clips} |`,
    );
  }
  return lines.join('\n');
}

/** The doc `--doc` rewrites when given no path, relative to the package root. */
export const DEFAULT_DOC = 'docs/evaluation.md';

export const DOC_BEGIN = '<!-- eval:begin -->';
export const DOC_END = '<!-- eval:end -->';

/** The markers of a named doc block: 'eval' (the policy table) or another, e.g. 'ablations'. */
export function docMarkers(name = 'eval'): [string, string] {
  return [`<!-- ${name}:begin -->`, `<!-- ${name}:end -->`];
}

/**
 * Replaces what lies between a block's markers, keeping the markers. Throws when they are
 * missing, because silently appending would leave a second, stale table in the doc.
 */
export function replaceDocBlock(doc: string, block: string, name = 'eval'): string {
  const [begin, end] = docMarkers(name);
  const a = doc.indexOf(begin);
  const b = doc.indexOf(end);
  if (a < 0 || b < 0 || b < a) {
    throw new Error(`the doc has no "${begin}" ... "${end}" block to rewrite`);
  }
  return `${doc.slice(0, a + begin.length)}\n${block.trim()}\n${doc.slice(b)}`;
}

/** The doc block: the table plus where it came from, so a stale table is recognisable. */
export function docBlock(report: EvalReport, command: string): string {
  const m = report.meta;
  const source = m
    ? `${report.clips.length} clips from \`${m.data}\`, model \`${m.model}\`, ` +
      `backend ${m.backend}${m.kv && m.kv !== 'f32' ? `, ${m.kv} KV` : ''}, ${m.date}` +
      (m.secondRequest
        ? "; agreement and KL are a recording's second request's (the first on the same tokens before it)"
        : '')
    : '';
  const updates = (m?.updates ?? [])
    .map(
      (u) =>
        ` The rows of ${u.rows.join(', ')} were re-run on ${u.date}${u.command ? ` by \`${u.command}\`` : ''}, ` +
        'clip by clip in place of the first run\'s (each row\'s "vs full" is measured in its own run).',
    )
    .join('');
  return (
    `${markdownTable(report.summary)}\n\n<sub>Generated by \`${command}\`${source ? `: ${source}` : ''}.${updates} ` +
    'WER % is against the reference text: it answers how well the model and the policy together transcribe. ' +
    "WER vs full %, agreement and KL vs full answer what the policy loses against the full cache, whatever the model's own accuracy: " +
    "WER vs full is against the full cache's transcript of the same clip; " +
    "agreement and KL decode the full cache's own tokens under the policy's cache (teacher-forced, " +
    "its recalls and releases running as in free decoding) and give the share of steps whose greedy token is the full cache's " +
    'and the mean KL(full ‖ policy) per token, in nats. ' +
    'WERs are pooled over clips (lower-case, punctuation stripped except apostrophes and periods, hypothesis truncated to 1.2× the reference). ' +
    'ms/token is the time on that backend; compare methods by the "vs full" ratio, measured in the same run.</sub>'
  );
}

/** A run's row label in a report: the policy, with its variant where it has one. */
const rowName = (r: { policy: string; variant?: string }) => (r.variant ? `${r.policy} (${r.variant})` : r.policy);

/**
 * `base` with `update`'s runs in place of its own for the same (policy, variant, budget),
 * clip by clip, and its summary recomputed: re-running a few policies after a change
 * refreshes their rows without re-running the rest. The two must cover the same clips;
 * the merge is recorded in `meta.updates`, so a table says which rows are newer. Each
 * row's "vs full" time ratio stays the one measured in its own run.
 */
export function mergeReports(base: EvalReport, update: EvalReport): EvalReport {
  const ids = (r: EvalReport) =>
    r.clips
      .map((c) => c.id)
      .sort()
      .join(',');
  if (ids(base) !== ids(update))
    throw new Error(
      `the reports cover different clips (${ids(base)} against ${ids(update)}): merge only re-runs of the same data`,
    );
  const rows = new Set<string>();
  const clips = base.clips.map((c) => {
    const fresh = new Map(update.clips.find((u) => u.id === c.id)!.runs.map((r) => [key(r), r]));
    for (const r of fresh.values()) rows.add(rowName(r));
    // In place, so the table keeps its row order; runs the base lacks go last.
    const runs = c.runs.map((r) => fresh.get(key(r)) ?? r);
    const had = new Set(c.runs.map(key));
    return { ...c, runs: [...runs, ...[...fresh.values()].filter((r) => !had.has(key(r)))] };
  });
  const meta = base.meta && {
    ...base.meta,
    updates: [
      ...(base.meta.updates ?? []),
      {
        date: update.meta?.date ?? new Date().toISOString(),
        ...(update.meta?.command ? { command: update.meta.command } : {}),
        rows: [...rows],
      },
    ],
  };
  // A time ratio compares runs measured together: each row keeps the one of the run it came from.
  const ratioOf = (r: SummaryRow) =>
    (update.summary.find((u) => key(u) === key(r)) ?? base.summary.find((u) => key(u) === key(r)))?.msPerTokenVsFull ??
    null;
  const summary = summarise(clips).map((r) => ({ ...r, msPerTokenVsFull: ratioOf(r) }));
  return { ...(meta ? { meta } : {}), clips, summary };
}
