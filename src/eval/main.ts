/**
 * `npm run eval -- --data DIR[,DIR...] --policies full,wnw --budgets 0.2,0.4 --out FILE.json [--limit N] [--no-full] [--doc [FILE]]`
 *
 * Runs every clip of DIR (`*.wav` with a same-named `*.txt` reference) through each
 * (policy, budget), then writes the JSON report, prints the markdown table and, with
 * --doc, rewrites the eval block of docs/evaluation.md (or of the FILE given). One
 * transcriber is loaded and each run overrides the policy, so every method uses the same
 * weights and the same device.
 * Every policy is also measured against the full cache (WER vs its transcript, and
 * teacher-forced agreement and KL: teacher-forced.ts) unless --no-full drops the full run.
 * A policy may carry ablation options, `wnw:ranking=voice:nVoice=8`: they go to its
 * factory, and its runs and summary row carry them as `variant`.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LoadOptions, TranscribeOptions, Transcriber, TranscriptionResult } from '../index.js';
import {
  type BackendChoice,
  UsageError,
  defaultModelDir,
  packageRoot,
  parseBackend,
  parseBudget,
  parseKvPrecision,
  parsePolicySpec,
  rejectUnknown,
  splitArgs,
} from '../cli/args.js';
import {
  FULL_BUDGET,
  type ClipRecord,
  type EvalReport,
  type RunRecord,
  DEFAULT_DOC,
  markdownTable,
  docBlock,
  replaceDocBlock,
  summarise,
} from './report.js';
import { wer } from './wer.js';
import { bleu } from './bleu.js';
import { type DataFormat, type EvalClip, clipAudio, parseFormat, readClips } from './datasets/index.js';
import { fidelityPlot } from './plot.js';
import { fidelityMeans } from './fidelity.js';
import { fullReference, teacherForced, type FullReference } from './teacher-forced.js';
import { forEvaluation } from '../policy/registry.js';
import type { KvPrecision } from '../index.js';

export interface EvalArgs {
  /** Clip folders; with more than one, clip ids are prefixed by the folder name. */
  data: string[];
  /** Policy specs: a name, or a name with ablation options (`wnw:ranking=voice`). */
  policies: string[];
  budgets: number[];
  out: string;
  limit: number;
  model: string;
  backend: BackendChoice;
  kv: KvPrecision;
  /** The doc whose block --doc rewrites (docs/evaluation.md unless a path is given), or null. */
  doc: string | null;
  /** Which block --doc rewrites: 'eval' (default) or another name, e.g. 'ablations'. */
  block: string;
  /** Run the full cache and measure every policy against it (false with --no-full). */
  full: boolean;
  /** SVG to write: agreement and WER vs full against measured r_GPU (plot.ts), or null. */
  plot: null | string;
  /** The data folders' layout: 'wav-txt' (name.wav + name.txt, the default) or a dataset's own (datasets/). */
  format: DataFormat;
  /** 'translate' asks the model for a translation into `target` and scores BLEU (and WER) against the clips' translation references. */
  task: 'transcribe' | 'translate';
  target: string | null;
  /**
   * The policies' teacher-forced decodes run as a recording's second request, after a first
   * one on the same tokens (--second-request): what a request that reuses the audio's KV,
   * as the policy left it, loses against the full cache.
   */
  secondRequest: boolean;
}

export const EVAL_USAGE =
  'usage: npm run eval -- --data DIR[,DIR...] --out FILE.json [--policies full,wnw,wnw:ranking=voice] [--budgets 0.2,0.4] [--limit N] ' +
  '[--model DIR] [--backend auto|webgpu|cpu] [--kv f32|f16] [--no-full] [--doc [FILE]] [--block eval|NAME] [--plot FILE.svg] ' +
  '[--format wav-txt|librispeech-long|longspeech|primock57] [--task transcribe|translate --target LANG] [--second-request]';

export function parseEvalArgs(argv: string[], cwd = process.cwd()): EvalArgs {
  // --doc takes an optional path: a following non-flag argument is its value.
  const i = argv.indexOf('--doc');
  const hasPath = i >= 0 && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--');
  const { flags, positional } = splitArgs(hasPath ? argv : argv.map((a) => (a === '--doc' ? '--doc=' : a)), [
    'no-full',
    'second-request',
  ]);
  rejectUnknown(flags, [
    'data',
    'policies',
    'budgets',
    'out',
    'limit',
    'model',
    'backend',
    'kv',
    'doc',
    'block',
    'no-full',
    'plot',
    'format',
    'task',
    'target',
    'second-request',
  ]);
  if (positional.length) throw new UsageError(`unexpected argument "${positional[0]}"`);
  const data = flags.get('data');
  const out = flags.get('out');
  if (!data) throw new UsageError('--data DIR is required');
  if (!out) throw new UsageError('--out FILE.json is required');
  const list = (s: string) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  const policies = [...new Set(list(flags.get('policies') ?? 'full,wnw'))];
  for (const p of policies) parsePolicySpec(p);
  const budgets = [...new Set(list(flags.get('budgets') ?? '0.2').map(parseBudget))];
  if (!policies.length) throw new UsageError('--policies is empty');
  if (!budgets.length) throw new UsageError('--budgets is empty');
  const full = !flags.has('no-full');
  if (!full && policies.every((p) => p === 'full')) throw new UsageError('--no-full leaves no policy to run');
  const limitStr = flags.get('limit');
  const limit = limitStr === undefined ? Infinity : Number(limitStr);
  if (!(Number.isInteger(limit) || limit === Infinity) || limit < 1)
    throw new UsageError(`--limit must be a positive integer, got "${limitStr}"`);
  const task = flags.get('task') ?? 'transcribe';
  if (task !== 'transcribe' && task !== 'translate')
    throw new UsageError(`--task must be transcribe or translate, got "${task}"`);
  const target = flags.get('target') || null;
  if (task === 'translate' && !target)
    throw new UsageError('--task translate needs --target LANG (the language to translate into)');
  const doc = flags.has('doc') ? resolve(cwd, flags.get('doc') || join(packageRoot(), DEFAULT_DOC)) : null;
  return {
    data: data
      .split(',')
      .filter(Boolean)
      .map((d) => resolve(cwd, d)),
    policies,
    budgets,
    out: resolve(cwd, out),
    limit,
    model: flags.has('model') ? resolve(cwd, flags.get('model')!) : defaultModelDir(),
    backend: parseBackend(flags.get('backend') ?? 'auto'),
    kv: parseKvPrecision(flags.get('kv') ?? 'f32'),
    doc,
    block: parseBlockName(flags.get('block') ?? 'eval'),
    full,
    plot: flags.get('plot') ? resolve(cwd, flags.get('plot')!) : null,
    format: parseFormat(flags.get('format') ?? 'wav-txt'),
    task,
    target,
    secondRequest: flags.has('second-request'),
  };
}

function parseBlockName(s: string): string {
  if (!/^[a-z][a-z0-9-]*$/.test(s))
    throw new UsageError(`--block must be a lower-case name such as "ablations", got "${s}"`);
  return s;
}

export type { EvalClip } from './datasets/index.js';
export { clipAudio, listClips, readClips } from './datasets/index.js';

/** Corpus BLEU of every (policy, budget) over the clips' translation references. */
export function translationBleu(records: ClipRecord[]): NonNullable<EvalReport['bleu']> {
  const groups = new Map<
    string,
    { policy: string; variant?: string; budget: number; hyps: string[]; refs: string[] }
  >();
  for (const clip of records) {
    for (const r of clip.runs) {
      const key = `${r.policy}|${r.variant ?? ''}|${r.budget}`;
      let g = groups.get(key);
      if (!g)
        groups.set(
          key,
          (g = {
            policy: r.policy,
            ...(r.variant ? { variant: r.variant } : {}),
            budget: r.budget,
            hyps: [],
            refs: [],
          }),
        );
      g.hyps.push(r.text);
      g.refs.push(clip.translation ?? '');
    }
  }
  return [...groups.values()].map(({ hyps, refs, ...row }) => ({
    ...row,
    bleu: Number(bleu(hyps, [refs]).score.toFixed(2)),
  }));
}

/**
 * The runs each clip gets: the full cache once (the reference for fidelity and msPerTokenVsFull; not with
 * --no-full), then every other policy at every budget.
 */
export function plannedRuns(policies: string[], budgets: number[], full = true): { policy: string; budget: number }[] {
  const runs: { policy: string; budget: number }[] = full ? [{ policy: 'full', budget: FULL_BUDGET }] : [];
  for (const policy of policies) if (policy !== 'full') for (const budget of budgets) runs.push({ policy, budget });
  return runs;
}

export interface EvalIo {
  load: (options: LoadOptions) => Promise<Transcriber>;
  readFile: (path: string) => Promise<Uint8Array>;
  /** File bytes to 16 kHz mono, once per clip rather than once per run. */
  decode: (bytes: Uint8Array) => Promise<Float32Array>;
  /** Progress and warnings (stderr). */
  log: (s: string) => void;
  tty: boolean;
  signal?: AbortSignal;
}

const SAMPLE_RATE = 16000;
/** Tokens of the untimed warm-up run before the first clip. */
export const WARMUP_TOKENS = 16;

/** Inside the package: relative to it; elsewhere: as given. */
function shortPath(p: string): string {
  const r = relative(packageRoot(), p);
  return r.startsWith('..') ? p : r;
}

const message = (e: unknown) => (e instanceof Error ? e.message.replace(/\s*\n\s*/g, ' ') : String(e));

/** A policy spec and budget as transcribe options, and the names its record carries. */
function specOptions(spec: string, budget: number) {
  const { policy, options: policyOptions, variant } = parsePolicySpec(spec);
  return {
    call: {
      policy,
      budget,
      ...(variant ? { policyOptions: forEvaluation(policy, policyOptions) } : {}),
    } satisfies TranscribeOptions,
    named: { policy, ...(variant ? { variant } : {}), budget },
  };
}

/**
 * One (policy, budget) on one clip. A run that throws (say the full cache does not fit a
 * 10-minute clip) is recorded with its error and an empty transcript, so it counts as
 * all-deleted in the pooled WER instead of ending the whole evaluation; a cancel still ends it.
 */
async function runOnce(
  asr: Transcriber,
  audio: Float32Array,
  reference: string,
  spec: string,
  budget: number,
  options: TranscribeOptions,
): Promise<{ run: RunRecord; result?: TranscriptionResult }> {
  const { call, named } = specOptions(spec, budget);
  try {
    const r = await asr.transcribe(audio, { ...options, ...call });
    const s = r.stats;
    const run: RunRecord = {
      ...named,
      text: r.text,
      wer: wer(reference, r.text),
      // The report's own (flat) names, so committed reports still read.
      rGpu: s.kv.rGpu,
      rGpuPeak: s.kv.rGpuPeak,
      rGpuCpu: s.kv.rGpuCpu,
      mbPerStep: s.traffic.mbPerStep,
      msPerToken: s.timing.msPerToken,
      decodeSteps: s.decodeSteps,
      planLag: s.planLag,
      stoppedBy: s.stoppedBy,
      ...(r.error ? { error: r.error.message } : {}),
    };
    return { run, result: r };
  } catch (e) {
    if (options.signal?.aborted) throw e;
    return {
      run: {
        ...named,
        text: '',
        wer: wer(reference, ''),
        rGpu: 0,
        rGpuCpu: 0,
        mbPerStep: 0,
        msPerToken: 0,
        decodeSteps: 0,
        stoppedBy: 'error',
        error: message(e),
      },
    };
  }
}

/**
 * Fills a run's fidelity to the full cache: WER against the full cache's transcript, then
 * the teacher-forced agreement and KL. Without a reference (the full run failed) or when
 * the forced decode fails, the measures are null and the reason is recorded.
 */
async function measureFidelity(
  asr: Transcriber,
  audio: Float32Array,
  ref: FullReference | string,
  run: RunRecord,
  spec: string,
  options: TranscribeOptions,
  secondRequest: boolean,
): Promise<void> {
  const none = { werVsFull: null, agreement: null, klVsFull: null, stopShift: null };
  if (typeof ref === 'string') {
    Object.assign(run, none, { fidelityError: ref });
    return;
  }
  run.werVsFull = wer(ref.text, run.text);
  try {
    const f = await teacherForced(secondRequest ? asSecondRequest(asr, audio) : (o) => asr.transcribe(audio, o), ref, {
      ...options,
      ...specOptions(spec, run.budget).call,
    });
    Object.assign(run, fidelityMeans(f), { forcedSteps: f.steps });
    if (f.coverage)
      Object.assign(run, {
        attentionCovered: f.coverage.mean,
        attentionCoveredByHead: f.coverage.perHead.map((x) => Number(x.toFixed(4))),
      });
  } catch (e) {
    if (options.signal?.aborted) throw e;
    Object.assign(run, { agreement: null, klVsFull: null, stopShift: null, fidelityError: message(e) });
  }
}

/**
 * A decode run as a recording's second request: the same request once before it (its
 * decode and its policy's recalls and releases), then the measured one, which reuses the
 * audio's KV as the first left it and prefills only its own ids.
 */
function asSecondRequest(asr: Transcriber, audio: Float32Array) {
  return async (o: TranscribeOptions): Promise<TranscriptionResult> => {
    const { probe, ...rest } = o;
    const { reusePrefill: _, ...data } = probe ?? {};
    const rec = await asr.open(audio, { signal: o.signal });
    try {
      // The same readouts as the measured request (a session is reused only by a request that reads what it was opened for).
      const quiet = Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, typeof v === 'function' ? () => {} : v]),
      );
      const first = await rec.transcribe({ ...rest, probe: quiet });
      if (first.error) throw first.error;
      const second = await rec.transcribe({ ...rest, probe: data });
      if (second.stats.prompt.reusedPositions === 0)
        throw new Error('the second request prefilled the audio again: it did not reuse the first one');
      return second;
    } finally {
      rec.dispose();
    }
  };
}

/** The full cache's reference for the clip's fidelity measures, or why there is none. */
async function reference(
  asr: Transcriber,
  audio: Float32Array,
  free: TranscriptionResult | undefined,
  options: TranscribeOptions,
): Promise<FullReference | string> {
  if (!free) return "the full cache's run failed";
  try {
    return await fullReference((o) => asr.transcribe(audio, o), free, options, { attention: true });
  } catch (e) {
    if (options.signal?.aborted) throw e;
    return message(e);
  }
}

const percent = (x: number | null | undefined) => (x == null ? '–' : `${(x * 100).toFixed(1)}%`);

export async function runEval(args: EvalArgs, io: EvalIo): Promise<EvalReport> {
  const warn = (s: string) => io.log(`eval: ${s}\n`);
  const clips: EvalClip[] = [];
  for (const dir of args.data) {
    const prefix = args.data.length > 1 ? `${basename(dir)}/` : '';
    for (const c of await readClips(dir, args.format, warn)) clips.push({ ...c, id: prefix + c.id });
  }
  clips.splice(args.limit);
  const translate = args.task === 'translate';
  if (translate) {
    const missing = clips.find((c) => c.translation === undefined);
    if (missing) throw new UsageError(`--task translate: clip ${missing.id} has no translation reference`);
  }
  const task: TranscribeOptions = translate ? { task: 'translate', targetLanguage: args.target! } : {};
  const runs = plannedRuns(args.policies, args.budgets, args.full);
  const fidelity = args.full && runs.length > 1;
  const total = clips.length * runs.length;
  let done = 0;
  let shown = '';
  const show = (line: string, final = false) => {
    // On a terminal one line is redrawn; in a log every run gets its own line, but not every percent.
    if (io.tty) io.log(`\r\x1b[2K${line}${final ? '\n' : ''}`);
    else if (final) io.log(`${line}\n`);
    shown = line;
  };

  const asr = await io.load({ model: args.model, policy: 'full', backend: args.backend, kvPrecision: args.kv });
  io.log(
    `eval: backend ${asr.backend}; ${clips.length} clips x ${runs.length} runs` +
      `${fidelity ? ', each but the full cache also teacher-forced on its tokens' : ''}\n`,
  );
  const records: ClipRecord[] = [];
  try {
    for (const [c, clip] of clips.entries()) {
      const audio = await clipAudio(clip, io);
      // A translation is scored against the target-language reference; a transcript against the transcript.
      const target = translate ? clip.translation! : clip.reference;
      if (c === 0) {
        // A process's first decode pays for compiling its code paths (the JIT here, shader
        // pipelines on a GPU). The full row is what every "vs full" ratio divides by, so an
        // untimed short run goes first (the full cache's, unless --no-full); it shares the
        // clip's encoding and prefill. A full cache that does not fit (a long clip) must not
        // end the evaluation: its own run records that error below.
        const warm = specOptions(args.full ? 'full' : runs[0].policy, runs[0].budget).call;
        await asr
          .transcribe(audio, {
            ...task,
            ...warm,
            maxNewTokens: WARMUP_TOKENS,
            probe: { reusePrefill: true },
            signal: io.signal,
          })
          .catch((e: unknown) => {
            if (io.signal?.aborted) throw e;
          });
      }
      const record: ClipRecord = {
        id: clip.id,
        audioSeconds: audio.length / SAMPLE_RATE,
        reference: clip.reference,
        ...(translate ? { translation: target } : {}),
        runs: [],
      };
      records.push(record);
      let ref: FullReference | string = '';
      for (const [i, { policy, budget }] of runs.entries()) {
        if (io.signal?.aborted) throw new Error('eval cancelled');
        const label = `[${done + 1}/${total}] ${clip.id} ${policy}${policy === 'full' ? '' : `@${budget}`}`;
        const last = i === runs.length - 1;
        const forced = fidelity && policy !== 'full';
        show(`${label} ...`);
        // Every call on a clip shares one encoding and prefill; the clip's last call lets it go.
        const { run, result } = await runOnce(asr, audio, target, policy, budget, {
          ...task,
          signal: io.signal,
          probe: { reusePrefill: !last || forced },
          onProgress: (e) => {
            if (e.phase === 'decode' && io.tty) show(`${label} decode ${Math.round(e.fraction * 100)}%`);
          },
        });
        if (policy === 'full' && fidelity) {
          show(`${label} full-cache logits ...`);
          ref = await reference(asr, audio, result, { ...task, signal: io.signal, probe: { reusePrefill: true } });
          if (typeof ref === 'string') warn(`${clip.id}: no fidelity measures (${ref})`);
        }
        if (forced) {
          show(`${label} teacher-forced ...`);
          await measureFidelity(
            asr,
            audio,
            ref,
            run,
            policy,
            { ...task, signal: io.signal, probe: { reusePrefill: !last } },
            args.secondRequest,
          );
        }
        record.runs.push(run);
        done++;
        const stop =
          run.stopShift != null ? `, stop shift ${run.stopShift >= 0 ? '+' : ''}${run.stopShift.toFixed(2)} nats` : '';
        const vsFull =
          run.werVsFull !== undefined
            ? `; vs full WER ${percent(run.werVsFull)}, agreement ${percent(run.agreement)}${stop}`
            : '';
        show(
          `${label} WER ${(run.wer * 100).toFixed(1)}%${vsFull} ${run.msPerToken.toFixed(1)} ms/token${run.error ? ` (${run.error})` : ''}`,
          true,
        );
      }
    }
  } finally {
    asr.dispose();
    if (io.tty && shown) io.log('\r\x1b[2K');
  }
  return {
    // Paths relative to the package, so the docs and committed reports carry no machine's home folder.
    meta: {
      model: shortPath(args.model),
      backend: asr.backend,
      kv: args.kv,
      date: new Date().toISOString(),
      data: args.data.map(shortPath).join(', '),
      ...(args.secondRequest ? { secondRequest: true } : {}),
    },
    clips: records,
    summary: summarise(records),
    ...(translate ? { bleu: translationBleu(records) } : {}),
  };
}

export async function main(argv = process.argv.slice(2)): Promise<number> {
  let args: EvalArgs;
  try {
    args = parseEvalArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`eval: ${e.message}\n${EVAL_USAGE}\n`);
    return 2;
  }
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort());
  try {
    const command = `npm run eval -- ${argv.join(' ')}`;
    const report = await runEval(args, {
      load: async (o) => (await import('../index.js')).loadTranscriber(o),
      readFile: (p) => readFile(p),
      decode: async (b) => (await import('../index.js')).toMono16k(b),
      log: (s) => process.stderr.write(s),
      tty: Boolean(process.stderr.isTTY),
      signal: abort.signal,
    });
    if (report.meta) report.meta.command = command;
    await mkdir(dirname(args.out), { recursive: true });
    await writeFile(args.out, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`${markdownTable(report.summary)}\n`);
    for (const b of report.bleu ?? [])
      process.stdout.write(
        `BLEU ${b.policy}${b.variant ? ` (${b.variant})` : ''}${b.policy === 'full' ? '' : `@${b.budget}`}: ${b.bleu.toFixed(2)}\n`,
      );
    process.stderr.write(`eval: wrote ${args.out}\n`);
    if (args.plot) {
      await writeFile(
        args.plot,
        fidelityPlot([{ title: args.data.map((d) => basename(d)).join(', '), summary: report.summary }]),
      );
      process.stderr.write(`eval: wrote ${args.plot}\n`);
    }
    if (args.doc) {
      await writeFile(
        args.doc,
        replaceDocBlock(await readFile(args.doc, 'utf8'), docBlock(report, command), args.block),
      );
      process.stderr.write(`eval: updated the ${args.block} table in ${args.doc}\n`);
    }
    return 0;
  } catch (e) {
    process.stderr.write(`eval: ${e instanceof Error ? e.message.replace(/\s*\n\s*/g, ' ') : String(e)}\n`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().then((code) => process.stdout.write('', () => process.exit(code)));
}
