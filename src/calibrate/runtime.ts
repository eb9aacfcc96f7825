/**
 * The runtime's calibration, with no file system: per clip the Voice Score's share
 * (teacher-forced attention) and the forward-only Head Sensitivity (sensitivity.ts), then
 * heads.json. Where clips come from and where finished clips are kept are the caller's:
 * the CLI reads a folder and keeps them in OUT.partial.json (run.ts); the demo page fetches
 * the site's calibration set or reads the user's files and keeps them in the browser's
 * storage (src/calibrate/browser-store.ts). Both resume a stopped run from what was kept.
 */
// From its module, not the entry: this runs in the calibration worker, which must not carry the engine.
import { toMono16k } from '../audio/decode.js';
import { kvHeadCount, promptLength, segmentLength, type ModelConfig } from '../model/config.js';
import type { LoadedModel } from '../model/loader.js';
import { answerAttention, tokenWordIndex } from './attention.js';
import type { WordSpan } from './voice-score.js';
import { buildHeadsFile } from './heads-file.js';
import { DEFAULT_ESTIMATOR, forwardsPerClip, type TriageEstimator } from './cost.js';
import { clipSensitivity, type ClipSensitivity } from './sensitivity.js';
import { directTriage } from './direct-sensitivity.js';
import { answerPathTriage } from './answer-path.js';
import { packedViews } from '../model/packed-weights.js';
import type { ClipTriage } from '../backend/types.js';
import { VoiceScoreAccumulator, type ClipVoice } from './voice-score.js';
import type { HeadsFile } from '../model/heads.js';
import type { CalibrationProgress } from '../types.js';

/** Turns a clip's 16 kHz samples into the decoder's audio embeddings. */
export type EncodeAudio = (samples: Float32Array) => Promise<{ embeddings: Float32Array; audioLength: number }>;

/** A calibration clip whose audio is read on demand (a file, a URL, a picked File). */
export interface ClipSource {
  id: string;
  text: string;
  words: Array<WordSpan & { word: string }>;
  /** Token ids of the transcript, when the clip ships them (the reference model's tokenisation). */
  tokens?: number[];
  /** The audio file's bytes (any format the decoder reads). */
  read(): Promise<Uint8Array>;
  /** Its duration where known beforehand (a manifest): weighs the clip in the expected time before it is encoded. */
  seconds?: number;
}

export interface ClipResult {
  id: string;
  audioLength: number;
  voice: ClipVoice;
  sensitivity?: ClipSensitivity;
}

export { DEFAULT_ESTIMATOR, type TriageEstimator };

export interface SensitivitySettings {
  estimator: TriageEstimator;
  /** Random directions per head ('finite-difference' only). */
  directions: number;
  step?: number;
  seed?: number;
  blockSize?: number | null;
}

/** Where a run is inside one clip: 'voice' is the teacher-forced pass of the Voice Score, 'head' one KV head's perturbed forwards. */
export type ClipStage =
  { stage: 'encode'; audioLength: number } | { stage: 'voice' } | { stage: 'head'; done: number; total: number };

/** The answer path's forward and backward on one clip (answer: transcript + stop token): a backend's `triage`. */
export type TriageForward = (embeddings: Float32Array, audioLength: number, answer: number[]) => Promise<ClipTriage>;

/** A triage on the CPU reference, with the model's weights as loaded (packed ones stay packed). */
export function referenceTriage(
  model: LoadedModel,
  estimator: 'answer-path' | 'direct-path' = 'answer-path',
): TriageForward {
  const c = model.config;
  const run = estimator === 'answer-path' ? answerPathTriage : directTriage;
  return async (embeddings, N, answer) =>
    run(c, model.packed ? packedViews(c, model.packed) : model.weights, embeddings, N, answer);
}

/**
 * One clip: its VS share and, with `sensitivity`, the HS (answer: transcript + eos): the
 * answer path's through `triage` (default the CPU reference), the direct path's and the
 * finite differences' on the CPU reference. `onStage` is called as each part finishes.
 */
export async function calibrateClipSamples(
  model: LoadedModel,
  encode: EncodeAudio,
  clip: ClipSource,
  sensitivity?: SensitivitySettings,
  onStage?: (s: ClipStage) => void,
  triage: TriageForward = referenceTriage(model),
): Promise<ClipResult> {
  const c = model.config;
  const samples = await toMono16k(await clip.read(), c.audio.sampleRate);
  const { embeddings, audioLength: N } = await encode(samples);
  onStage?.({ stage: 'encode', audioLength: N });
  // A clip's stored ids are the reference model's; a Hugging Face folder tokenises the
  // transcript alone, as answer-ids.ts hands it to the Head Sensitivity.
  const tokens = model.text
    ? model.text.encode(clip.text, { bos: false, eos: false })
    : (clip.tokens ?? model.tokenizer.encode(clip.text));
  const tok = model.text ?? model.tokenizer;
  const wordOf = tokenWordIndex(tokens.map((t) => tok.pieceText(t)));
  const answer = [...tokens, c.stopTokens[0]];
  // The triage's forward keeps the same attention rows the Voice Score reads.
  const forward =
    sensitivity?.estimator === 'answer-path'
      ? triage
      : sensitivity?.estimator === 'direct-path'
        ? referenceTriage(model, 'direct-path')
        : undefined;
  const direct = forward ? await forward(embeddings, N, answer) : undefined;
  const rows = direct ? direct.rows : answerAttention(c, model.weights, embeddings, N, tokens);
  const vs = new VoiceScoreAccumulator({
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    tokensPerSecond: c.audio.tokensPerSecond,
  });
  tokens.forEach((_, j) => {
    const span = clip.words[wordOf[j]];
    if (span) vs.addToken(span, N, (q) => rows[j][q]);
  });
  const voice = vs.endClip();
  onStage?.({ stage: 'voice' });
  const hs: ClipSensitivity | undefined = direct
    ? { sum: direct.sum, tokens: direct.tokens, meanCe: direct.meanCe }
    : sensitivity
      ? clipSensitivity(c, model.weights, embeddings, N, answer, {
          directions: sensitivity.directions,
          step: sensitivity.step,
          blockSize: sensitivity.blockSize ?? undefined,
          seed: (sensitivity.seed ?? 1) + hashId(clip.id),
          onHead: (done, total) => onStage?.({ stage: 'head', done, total }),
        })
      : undefined;
  return { id: clip.id, audioLength: N, voice, ...(hs ? { sensitivity: hs } : {}) };
}

/** A clip's seed offset from its name, so a resumed run draws the same directions as an uninterrupted one. */
function hashId(id: string): number {
  let h = 0;
  for (const ch of id) h = (Math.imul(h, 31) + ch.charCodeAt(0)) >>> 0;
  return h;
}

/** Finished clips kept between runs (the CLI: a JSON file; the page: the browser's storage). */
export interface PartialStore {
  load(): Promise<PartialFile | null>;
  save(p: PartialFile): Promise<void>;
  clear(): Promise<void>;
}

export interface PartialFile {
  model: string;
  settings: { estimator: TriageEstimator; directions: number; step: number; blockSize: number | null };
  clips: ClipResult[];
}

/** Progress of a run: where it is, and the seconds it expects still to take. */
export type { CalibrationProgress };

export { forwardsPerClip };

export interface RuntimeCalibrationOptions {
  /** How the Head Sensitivity is estimated; default `DEFAULT_ESTIMATOR`. */
  estimator?: TriageEstimator;
  /** Random directions per head for the finite-difference estimate; default 4. */
  directions?: number;
  step?: number;
  /** Audio positions perturbed together (sensitivity.ts `blockSize`); default all of a clip's. */
  blockSize?: number;
  store?: PartialStore;
  /** The answer path's forward and backward; default the CPU reference (a transcriber passes its backend's). */
  triage?: TriageForward;
  /** Runs each clip's work (a transcriber queues it between its other requests); default at once. */
  schedule?: <T>(job: () => Promise<T>) => Promise<T>;
  onProgress?: (p: CalibrationProgress) => void;
  /** Checked between clips: a stop keeps the finished clips in the store for the next run. */
  signal?: AbortSignal;
  /** Clock in milliseconds (tests); default performance.now / Date.now. */
  now?: () => number;
}

const clock = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/**
 * Runs the calibration over `clips` and returns the heads file (`sensitivityEstimator:
 * 'finite-difference'`), or null when stopped by `signal` (the store keeps what finished).
 */
export async function calibrateClips(
  model: LoadedModel,
  encode: EncodeAudio,
  clips: ClipSource[],
  o: RuntimeCalibrationOptions = {},
): Promise<HeadsFile | null> {
  const c = model.config;
  if (clips.length === 0) throw new RangeError('no calibration clips');
  const settings = {
    estimator: o.estimator ?? DEFAULT_ESTIMATOR,
    directions: o.directions ?? 4,
    step: o.step ?? 1e-2,
    blockSize: o.blockSize ?? null,
  };
  const now = o.now ?? clock;
  const saved = new Map<string, ClipResult>();
  const p = await o.store?.load();
  // Clips of another model or other settings do not mix with this run's.
  if (p && p.model === c.name && JSON.stringify(p.settings) === JSON.stringify(settings))
    for (const r of p.clips) saved.set(r.id, r);
  // The expected time: each clip costs forwardsPerClip forwards, each about as long as the
  // clip's prompt (audio tokens known once encoded; until then the mean of those known). The
  // time per forward is measured on this run's own passes, so it holds for this machine.
  const perClip = forwardsPerClip(c, settings.estimator, settings.directions);
  // Audio tokens per clip: encoded (exact), else from its stated seconds, scaled by what
  // encoding gave the others (an encoder may pad: Voxtral's gives 375 tokens to any clip under 30 s).
  const stated = new Map(
    clips.flatMap((k): [string, number][] => (k.seconds ? [[k.id, k.seconds * c.audio.tokensPerSecond]] : [])),
  );
  const length = new Map([...saved.values()].map((r): [string, number] => [r.id, r.audioLength]));
  const lengthOf = (id: string): number | undefined => {
    const n = length.get(id);
    if (n !== undefined) return n;
    const s0 = stated.get(id);
    if (s0 === undefined) return undefined;
    const both = [...length.keys()].filter((k) => stated.has(k));
    return both.length ? s0 * (both.reduce((a, k) => a + length.get(k)! / stated.get(k)!, 0) / both.length) : s0;
  };
  const typical = () => {
    const known = clips.map((k) => lengthOf(k.id)).filter((n): n is number => n !== undefined);
    return known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1;
  };
  const scale = (id: string) => {
    const n = lengthOf(id);
    return n === undefined ? 1 : promptLength(c, n) / promptLength(c, typical());
  };
  let measuredUnits = 0;
  let measuredMs = 0;
  // A clip longer than expected raises the total: the bar holds still rather than going back.
  let shown = 0;
  const results: ClipResult[] = [];
  const nHeads = kvHeadCount(c);
  for (const [i, clip] of clips.entries()) {
    if (o.signal?.aborted) return null;
    const t0 = now();
    const report = (head: number, clipForwards: number, finished?: CalibrationProgress['finished']) => {
      const total = clips.reduce((a, k) => a + perClip * scale(k.id), 0);
      const done = clips.slice(0, i).reduce((a, k) => a + perClip * scale(k.id), 0) + clipForwards * scale(clip.id);
      const msPerUnit = measuredUnits > 0 ? measuredMs / measuredUnits : null;
      o.onProgress?.({
        clip: i + 1,
        clips: clips.length,
        id: clip.id,
        head,
        heads: nHeads,
        fraction: (shown = Math.max(shown, Math.min(1, done / total))),
        secondsLeft: msPerUnit === null ? null : Math.max(0, (msPerUnit * (total - done)) / 1000),
        ...(finished ? { finished } : {}),
      });
    };
    let r = saved.get(clip.id);
    const reused = !!r;
    if (!r) {
      let forwards = 0;
      let mark = t0;
      const account = (f: number) => {
        const t = now();
        measuredUnits += f * scale(clip.id);
        measuredMs += t - mark;
        mark = t;
        forwards += f;
      };
      const schedule = o.schedule ?? ((job) => job());
      r = await schedule(() =>
        calibrateClipSamples(
          model,
          encode,
          clip,
          settings,
          (s) => {
            if (s.stage === 'encode') {
              // The encoder is not a decoder forward: its time stays out of the rate.
              length.set(clip.id, s.audioLength);
              mark = now();
              return;
            }
            // Head d's perturbations; the first head also carries the unperturbed pass before it.
            account(
              s.stage === 'voice'
                ? forwardsPerClip(c, settings.estimator, 0) - (settings.estimator === 'finite-difference' ? 1 : 0)
                : (s.done === 1 ? 1 : 0) +
                    (settings.directions * (c.numLayers - Math.floor((s.done - 1) / c.numKvHeads))) / c.numLayers,
            );
            report(s.stage === 'head' ? s.done : 0, forwards);
          },
          o.triage,
        ),
      );
      saved.set(clip.id, r);
      await o.store?.save({ model: c.name, settings, clips: [...saved.values()] });
    }
    results.push(r);
    report(nHeads, perClip, { seconds: (now() - t0) / 1000, reused });
  }
  const heads = combineClips(c, results, settings.estimator);
  await o.store?.clear();
  return heads;
}

/** heads.json from the clips' results: VS over clips, HS averaged over all answer tokens. */
export function combineClips(c: ModelConfig, results: ClipResult[], estimator: TriageEstimator): HeadsFile {
  const vs = new VoiceScoreAccumulator({
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    tokensPerSecond: c.audio.tokensPerSecond,
  });
  const hsSum = new Float64Array(kvHeadCount(c));
  let hsTokens = 0;
  for (const r of results) {
    vs.addClip(r.voice);
    if (!r.sensitivity) throw new Error(`clip ${r.id} has no head sensitivity`);
    r.sensitivity.sum.forEach((s, h) => (hsSum[h] += s));
    hsTokens += r.sensitivity.tokens;
  }
  return buildHeadsFile({
    model: c.name,
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: vs.result().voiceScore,
    headSensitivity: Array.from(hsSum, (s) => s / (hsTokens || 1)),
    sensitivityEstimator: estimator,
    clipLengths: results.map((r) => r.audioLength),
    segmentLength: segmentLength(c),
  });
}
