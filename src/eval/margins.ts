/**
 * `npm run eval:margins -- --data DIR --against SPEC [--budget 0.2] [--against-kv f32|f16] [--kv f32|f16] [--model DIR] [--limit N]`
 *
 * How fragile a free run is on this model: per clip, the full cache's margin between its
 * best and second-best token at each step (log-probabilities, teacher-forced on its own
 * tokens), the share of steps under 0.1, 0.5 and 1 nat, and the steps where another cache
 * picks another token, with the full cache's margin there. The other cache is a policy at a
 * budget (`--against wnw`, `wnw:prefillRecall=false`), or the full cache at another KV
 * precision (`--against full --against-kv f16`). A free run forks at its first such step, so
 * a cache that flips only near-ties can still give a transcript far from the full cache's.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  UsageError,
  defaultModelDir,
  parseBudget,
  parseKvPrecision,
  parsePolicySpec,
  rejectUnknown,
  splitArgs,
} from '../cli/args.js';
import { argmax } from '../reference/argmax.js';
import { forcedLogits } from './teacher-forced.js';
import { clipAudio, readClips } from './datasets/index.js';
import type { TranscribeOptions } from '../index.js';
import { forEvaluation } from '../policy/registry.js';

export const MARGINS_USAGE =
  'usage: npm run eval:margins -- --data DIR --against SPEC [--budget 0.2] [--against-kv f32|f16] [--kv f32|f16] ' +
  '[--model DIR] [--limit N]';

/** The margin thresholds reported, in nats. */
export const MARGIN_CUTS = [0.1, 0.5, 1] as const;

export interface MarginReport {
  steps: number;
  /** Share of the full cache's steps whose margin is under each of MARGIN_CUTS. */
  under: number[];
  /** Steps where the other cache's greedy token differs, with the full cache's margin there. */
  flips: { step: number; margin: number }[];
}

/** The best log-probability minus the second best: the gap of the two largest logits (0 for a tie, Infinity for one token). */
export function topMargin(logits: Float32Array): number {
  let a = -Infinity;
  let b = -Infinity;
  for (const x of logits) {
    if (x > a) [a, b] = [x, a];
    else if (x > b) b = x;
  }
  return a - b;
}

/** Compares two caches' logits on the same forced tokens. */
export function marginReport(full: readonly Float32Array[], other: readonly Float32Array[]): MarginReport {
  if (full.length !== other.length)
    throw new RangeError(`the full cache has logits for ${full.length} steps, the other cache for ${other.length}`);
  const margins = full.map(topMargin);
  const flips: MarginReport['flips'] = [];
  full.forEach((l, t) => {
    if (argmax(l) !== argmax(other[t])) flips.push({ step: t, margin: margins[t] });
  });
  const n = Math.max(1, margins.length);
  return { steps: margins.length, under: MARGIN_CUTS.map((c) => margins.filter((m) => m < c).length / n), flips };
}

export function formatReport(id: string, r: MarginReport): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  const median = r.flips.length
    ? [...r.flips].sort((a, b) => a.margin - b.margin)[Math.floor(r.flips.length / 2)].margin.toFixed(2)
    : '–';
  const first = r.flips
    .slice(0, 10)
    .map((f) => `${f.step} (${f.margin.toFixed(2)})`)
    .join(', ');
  return (
    `${id}: ${r.steps} steps; margin under ${MARGIN_CUTS.join(' / ')} nats: ${r.under.map(pct).join(' / ')}; ` +
    `${r.flips.length} ${r.flips.length === 1 ? 'flip' : 'flips'} ` +
    `(agreement ${(1 - r.flips.length / Math.max(1, r.steps)).toFixed(3)}), median margin ${median}${first ? `; first: ${first}` : ''}`
  );
}

export async function main(argv = process.argv.slice(2), cwd = process.cwd()): Promise<number> {
  try {
    const { flags, positional } = splitArgs(argv, []);
    rejectUnknown(flags, ['data', 'against', 'budget', 'against-kv', 'kv', 'model', 'limit']);
    if (positional.length) throw new UsageError(`unexpected argument "${positional[0]}"`);
    const data = flags.get('data');
    const against = flags.get('against');
    if (!data) throw new UsageError('--data DIR is required');
    if (!against) throw new UsageError('--against SPEC is required (a policy such as wnw, or full with --against-kv)');
    const spec = parsePolicySpec(against);
    const budget = parseBudget(flags.get('budget') ?? '0.2');
    const kv = parseKvPrecision(flags.get('kv') ?? 'f32');
    const otherKv = parseKvPrecision(flags.get('against-kv') ?? kv);
    if (spec.policy === 'full' && otherKv === kv)
      throw new UsageError('--against full compares with the full cache itself: give --against-kv another precision');
    const limitStr = flags.get('limit');
    const limit = limitStr === undefined ? Infinity : Number(limitStr);
    if (!(Number.isInteger(limit) || limit === Infinity) || limit < 1)
      throw new UsageError(`--limit must be a positive integer, got "${limitStr}"`);
    const model = flags.has('model') ? resolve(cwd, flags.get('model')!) : defaultModelDir();
    const { loadTranscriber, toMono16k } = await import('../index.js');
    const ref = await loadTranscriber({ model, policy: 'full', backend: 'cpu', kvPrecision: kv });
    const alt =
      otherKv === kv ? ref : await loadTranscriber({ model, policy: 'full', backend: 'cpu', kvPrecision: otherKv });
    const io = { readFile: (p: string) => readFile(p), decode: async (b: Uint8Array) => toMono16k(b) };
    const clips = (
      await readClips(resolve(cwd, data), 'wav-txt', (s) => process.stderr.write(`eval:margins: ${s}\n`))
    ).slice(0, limit);
    const otherOptions: TranscribeOptions =
      spec.policy === 'full'
        ? { policy: 'full', budget: 1 }
        : {
            policy: spec.policy,
            budget,
            ...(spec.variant ? { policyOptions: forEvaluation(spec.policy, spec.options) } : {}),
          };
    try {
      for (const clip of clips) {
        const audio = await clipAudio(clip, io);
        const free = await ref.transcribe(audio, { policy: 'full', budget: 1, probe: { reusePrefill: true } });
        if (free.error) throw free.error;
        const tokens = free.tokens.slice(0, free.stats.decodeSteps);
        // One encoding and prefill for the clip's runs on one transcriber; its last run lets it go.
        const full = await forcedLogits((o) => ref.transcribe(audio, o), tokens, {
          policy: 'full',
          budget: 1,
          probe: { reusePrefill: alt === ref },
        });
        const other = await forcedLogits((o) => alt.transcribe(audio, o), tokens, otherOptions);
        process.stdout.write(`${formatReport(clip.id, marginReport(full, other))}\n`);
      }
    } finally {
      ref.dispose();
      if (alt !== ref) alt.dispose();
    }
    return 0;
  } catch (e) {
    process.stderr.write(
      `eval:margins: ${e instanceof Error ? e.message : String(e)}\n${e instanceof UsageError ? `${MARGINS_USAGE}\n` : ''}`,
    );
    return e instanceof UsageError ? 2 : 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  void main().then((code) => process.exit(code));
}
