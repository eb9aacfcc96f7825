/**
 * `wnw calibrate --model DIR [--clips DIR] [--limit N] [--out FILE] [--backend B]
 * [--estimator answer-path|direct-path|finite-difference [--directions M] [--block N]]
 * [--language CODE] [--compare HEADS.json]`: heads.json computed by the runtime alone. By
 * default the head triage of `Transcriber.calibrate` (one teacher-forced forward a clip and a
 * backward of its answer rows, on the backend the transcriber runs, src/calibrate/answer-path.ts);
 * `--estimator direct-path` (src/calibrate/direct-sensitivity.ts) and `finite-difference` (the
 * forward-only finite differences, src/calibrate/sensitivity.ts) run on the CPU reference. Progress
 * per clip on stderr; every finished clip is kept in OUT.partial.json, so a stopped run resumes.
 */
import { mkdirSync, openAsBlob, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UsageError, commandArgs, parseBackend } from './args.js';

/** Clips a calibration takes unless --limit says otherwise: the triage chosen on calibration data (docs/calibrate-real-model.md). */
export const DEFAULT_CLIPS = 8;
import { usageLine } from './help.js';
import type { TriageEstimator } from '../calibrate/runtime.js';
import type { HeadsFile } from '../model/heads.js';
import type { BackendChoice } from './args.js';

export const CALIBRATE_USAGE = usageLine('calibrate');

export interface CalibrateArgs {
  model: string;
  clips: string;
  limit?: number;
  out: string;
  estimator?: TriageEstimator;
  backend: BackendChoice;
  directions?: number;
  blockSize?: number;
  language?: string;
  compare?: string;
}

export function parseCalibrateArgs(argv: string[], cwd = process.cwd()): CalibrateArgs {
  const { flags, positional } = commandArgs('calibrate', argv);
  if (positional.length) throw new UsageError(`unexpected argument "${positional[0]}"`);
  const model = flags.get('model');
  if (!model) throw new UsageError('--model DIR is required');
  const count = (name: string) => {
    const v = flags.get(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer, got "${v}"`);
    return n;
  };
  const dir = resolve(cwd, model);
  const estimator = flags.get('estimator');
  if (
    estimator !== undefined &&
    estimator !== 'answer-path' &&
    estimator !== 'direct-path' &&
    estimator !== 'finite-difference'
  )
    throw new UsageError(`--estimator must be answer-path, direct-path or finite-difference, got "${estimator}"`);
  if (estimator !== 'finite-difference' && (flags.has('directions') || flags.has('block')))
    throw new UsageError(
      '--directions and --block set the finite-difference estimate: add --estimator finite-difference',
    );
  return {
    model: dir,
    clips: resolve(cwd, flags.get('clips') ?? 'calibration-data'),
    limit: count('limit') ?? DEFAULT_CLIPS,
    backend: parseBackend(flags.get('backend') ?? 'auto'),
    out: resolve(cwd, flags.get('out') ?? join(dir, 'heads.json')),
    ...(estimator ? { estimator } : {}),
    directions: count('directions'),
    blockSize: count('block'),
    language: flags.get('language'),
    compare: flags.has('compare') ? resolve(cwd, flags.get('compare')!) : undefined,
  };
}

/** Runs it; stderr gets the progress, stdout the comparison when asked for. Returns the exit code. */
export async function calibrateCommand(
  a: CalibrateArgs,
  io: { stdout: (s: string) => void; stderr: (s: string) => void; signal?: AbortSignal },
): Promise<number> {
  const { partialPath } = await import('../calibrate/run.js');
  const heads = await (a.estimator === undefined || a.estimator === 'answer-path'
    ? onTranscriber(a, io)
    : onReference(a, a.estimator, io));
  if (!heads) {
    io.stderr(`calibrate: stopped; finished clips are in ${partialPath(a.out)} and the next run resumes from them\n`);
    return 130;
  }
  io.stderr(`calibrate: wrote ${a.out}\n`);
  if (a.compare) {
    const { compareCalibrations } = await import('../calibrate/compare.js');
    const { parseHeadsFile } = await import('../policy/wnw/triage.js');
    const ref = parseHeadsFile(
      JSON.parse(readFileSync(a.compare, 'utf8')),
      heads.numLayers,
      heads.numKvHeads,
      a.compare,
    );
    for (const line of compareCalibrations(ref, heads)) io.stdout(`${line}\n`);
  }
  return 0;
}

type Io = Parameters<typeof calibrateCommand>[1];

/** The default triage: `Transcriber.calibrate` on the backend `--backend` picks, with the weights it loads. */
async function onTranscriber(a: CalibrateArgs, io: Io): Promise<HeadsFile | null> {
  const { loadTranscriber } = await import('../transcribe/transcriber.js');
  const { listCalibrationClips } = await import('../calibrate/clips.js');
  const { fileStore, partialPath } = await import('../calibrate/run.js');
  const { CancelledError } = await import('../errors.js');
  const files = await listCalibrationClips(a.clips, a.limit);
  const clips = await Promise.all(
    files.map(async (f) => ({
      id: f.id,
      text: f.text,
      words: f.words,
      ...(f.tokens ? { tokens: f.tokens } : {}),
      // A Blob backed by the file: read when the clip's turn comes.
      audio: await openAsBlob(f.wav),
    })),
  );
  const t = await loadTranscriber({
    model: a.model,
    policy: 'full',
    backend: a.backend,
    ...(a.language ? { language: a.language } : {}),
  });
  try {
    io.stderr(
      `calibrate: ${clips.length} clip${clips.length === 1 ? '' : 's'}, one forward and an answer-row backward each, on ${t.backend}` +
        `${t.backendReason ? ` (${t.backendReason})` : ''}\n`,
    );
    const r = await t.calibrate(
      clips,
      {
        signal: io.signal,
        onProgress: (p) =>
          p.finished &&
          io.stderr(
            `calibrate: clip ${p.clip}/${p.clips} ${p.id} ${p.finished.reused ? '(saved earlier)' : `${p.finished.seconds.toFixed(1)} s`}\n`,
          ),
      },
      fileStore(partialPath(a.out)),
    );
    mkdirSync(dirname(a.out), { recursive: true });
    writeFileSync(a.out, JSON.stringify(r.heads, null, 1) + '\n');
    return r.heads;
  } catch (e) {
    if (e instanceof CancelledError) return null;
    throw e;
  } finally {
    t.dispose();
  }
}

/** The direct-path and finite-difference estimates, on the CPU reference decoder; calibrateRuntime writes the file. */
async function onReference(
  a: CalibrateArgs,
  estimator: 'direct-path' | 'finite-difference',
  io: Io,
): Promise<HeadsFile | null> {
  const { loadModel } = await import('../model/loader.js');
  const { createAudioRoute } = await import('../route/audio-route.js');
  const { calibrateRuntime } = await import('../calibrate/run.js');
  const model = await loadModel(a.model, undefined, { language: a.language });
  const route = await createAudioRoute(model, { file: join(a.model, 'encoder.onnx') });
  try {
    return await calibrateRuntime(model, (s) => route.encode(s), {
      modelDir: a.model,
      clipsDir: a.clips,
      limit: a.limit,
      out: a.out,
      estimator,
      directions: a.directions,
      blockSize: a.blockSize,
      signal: io.signal,
      onClip: (done, total, id, seconds, reused) =>
        io.stderr(`calibrate: clip ${done}/${total} ${id} ${reused ? '(saved earlier)' : `${seconds.toFixed(1)} s`}\n`),
    });
  } finally {
    await route.dispose();
  }
}
