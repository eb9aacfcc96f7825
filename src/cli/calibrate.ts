/**
 * `wnw calibrate --model DIR [--clips DIR] [--limit N] [--out FILE] [--directions M]
 * [--language CODE] [--compare HEADS.json]`: heads.json computed by the runtime alone, the
 * Voice Score from teacher-forced attention and the Head Sensitivity from forward-only
 * finite differences (src/calibrate/sensitivity.ts), on the CPU decoder. Progress per clip
 * on stderr; every finished clip is kept in OUT.partial.json, so a stopped run resumes.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError, commandArgs } from './args.js';
import { usageLine } from './help.js';
import type { TriageEstimator } from '../calibrate/runtime.js';

export const CALIBRATE_USAGE = usageLine('calibrate');

export interface CalibrateArgs {
  model: string;
  clips: string;
  limit?: number;
  out: string;
  estimator?: TriageEstimator;
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
  if (estimator !== undefined && estimator !== 'direct-path' && estimator !== 'finite-difference')
    throw new UsageError(`--estimator must be direct-path or finite-difference, got "${estimator}"`);
  if (estimator !== 'finite-difference' && (flags.has('directions') || flags.has('block')))
    throw new UsageError('--directions and --block set the finite-difference estimate: add --estimator finite-difference');
  return {
    model: dir,
    clips: resolve(cwd, flags.get('clips') ?? 'calibration-data'),
    limit: count('limit'),
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
  const { loadModel } = await import('../model/loader.js');
  const { createAudioRoute } = await import('../route/audio-route.js');
  const { calibrateRuntime, partialPath } = await import('../calibrate/run.js');
  const model = await loadModel(a.model, undefined, { language: a.language });
  const route = await createAudioRoute(model, { file: join(a.model, 'encoder.onnx') });
  try {
    const heads = await calibrateRuntime(model, (s) => route.encode(s), {
      modelDir: a.model,
      clipsDir: a.clips,
      limit: a.limit,
      out: a.out,
      estimator: a.estimator,
      directions: a.directions,
      blockSize: a.blockSize,
      signal: io.signal,
      onClip: (done, total, id, seconds, reused) =>
        io.stderr(`calibrate: clip ${done}/${total} ${id} ${reused ? '(saved earlier)' : `${seconds.toFixed(1)} s`}\n`),
    });
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
  } finally {
    await route.dispose();
  }
}
