/**
 * Calibration run on the runtime alone: per clip the Voice Score's share (teacher-forced
 * attention) and, unless left out, the forward-only Head Sensitivity (sensitivity.ts); then
 * heads.json. Every finished clip is saved to `OUT.partial.json` beside the output, and a
 * re-run with the same settings reuses those clips and computes only the rest.
 */
import { readFileSync, renameSync, rmSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { toMono16k } from '../audio/decode.js';
import { kvHeadCount, segmentLength } from '../model/config.js';
import type { HeadsFile } from '../model/heads.js';
import type { LoadedModel } from '../model/loader.js';
import { answerAttention, tokenWordIndex } from './attention.js';
import { listCalibrationClips, type CalibrationClip } from './clips.js';
import { buildHeadsFile } from './heads-file.js';
import { clipSensitivity, type ClipSensitivity } from './sensitivity.js';
import { VoiceScoreAccumulator, type ClipVoice } from './voice-score.js';

/** Turns a clip's 16 kHz samples into the decoder's audio embeddings. */
export type EncodeAudio = (samples: Float32Array) => Promise<{ embeddings: Float32Array; audioLength: number }>;

export interface ClipResult {
  id: string;
  audioLength: number;
  voice: ClipVoice;
  sensitivity?: ClipSensitivity;
}

/** One clip: its VS share and, with `sensitivity`, the forward-only HS (answer: transcript + eos). */
export async function calibrateClip(model: LoadedModel, encode: EncodeAudio, clip: CalibrationClip, sensitivity?: { directions: number; step?: number; seed?: number; blockSize?: number | null }): Promise<ClipResult> {
  const c = model.config;
  const samples = await toMono16k(new Uint8Array(readFileSync(clip.wav)), c.audio.sampleRate);
  const { embeddings, audioLength: N } = await encode(samples);
  // A clip's stored ids are the reference model's; a Hugging Face folder tokenises the
  // transcript alone, as answer-ids.ts hands it to the Head Sensitivity.
  const tokens = model.text ? model.text.encode(clip.text, { bos: false, eos: false }) : clip.tokens ?? model.tokenizer.encode(clip.text);
  const tok = model.text ?? model.tokenizer;
  const wordOf = tokenWordIndex(tokens.map((t) => tok.pieceText(t)));
  const rows = answerAttention(c, model.weights, embeddings, N, tokens);
  const vs = new VoiceScoreAccumulator({ numLayers: c.numLayers, numHeads: c.numHeads, numKvHeads: c.numKvHeads, tokensPerSecond: c.audio.tokensPerSecond });
  tokens.forEach((_, j) => {
    const span = clip.words[wordOf[j]];
    if (span) vs.addToken(span, N, (q) => rows[j][q]);
  });
  const voice = vs.endClip();
  const hs = sensitivity ? clipSensitivity(c, model.weights, embeddings, N, [...tokens, c.stopTokens[0]], { ...sensitivity, blockSize: sensitivity.blockSize ?? undefined, seed: (sensitivity.seed ?? 1) + hashId(clip.id) }) : undefined;
  return { id: clip.id, audioLength: N, voice, ...(hs ? { sensitivity: hs } : {}) };
}

/** A clip's seed offset from its name, so a resumed run draws the same directions as an uninterrupted one. */
function hashId(id: string): number {
  let h = 0;
  for (const ch of id) h = (Math.imul(h, 31) + ch.charCodeAt(0)) >>> 0;
  return h;
}

export interface RuntimeCalibration {
  modelDir: string;
  clipsDir: string;
  limit?: number;
  /** heads.json to write; default MODEL/heads.json. */
  out?: string;
  /** Random directions per head for the HS estimate; default 4. */
  directions?: number;
  step?: number;
  /** Audio positions perturbed together (sensitivity.ts `blockSize`); default all of a clip's. */
  blockSize?: number;
  /** Progress, one call per clip (reused: taken from the partial file). */
  onClip?: (done: number, total: number, id: string, seconds: number, reused: boolean) => void;
  /** Checked between clips: a stop keeps the partial file for the next run. */
  signal?: AbortSignal;
}

interface PartialFile {
  model: string;
  settings: { directions: number; step: number; blockSize: number | null };
  clips: ClipResult[];
}

export function partialPath(out: string): string {
  return `${out}.partial.json`;
}

/**
 * Runs the calibration and writes heads.json with `sensitivityEstimator: 'finite-difference'`.
 * Returns the heads file, or null when stopped by `signal` (the partial file stays).
 */
export async function calibrateRuntime(model: LoadedModel, encode: EncodeAudio, o: RuntimeCalibration): Promise<HeadsFile | null> {
  const c = model.config;
  const out = o.out ?? join(o.modelDir, 'heads.json');
  const partial = partialPath(out);
  const settings = { directions: o.directions ?? 4, step: o.step ?? 1e-2, blockSize: o.blockSize ?? null };
  const clips = await listCalibrationClips(o.clipsDir, o.limit);
  // Made before the first clip, not found missing after its minutes of work.
  mkdirSync(dirname(out), { recursive: true });
  const saved = new Map<string, ClipResult>();
  if (existsSync(partial)) {
    const p = JSON.parse(readFileSync(partial, 'utf8')) as PartialFile;
    // Clips of another model or other settings do not mix with this run's.
    if (p.model === c.name && JSON.stringify(p.settings) === JSON.stringify(settings)) for (const r of p.clips) saved.set(r.id, r);
  }
  const results: ClipResult[] = [];
  for (const [i, clip] of clips.entries()) {
    if (o.signal?.aborted) return null;
    const t0 = Date.now();
    const reused = saved.get(clip.id);
    const r = reused ?? (await calibrateClip(model, encode, clip, settings));
    results.push(r);
    if (!reused) {
      saved.set(clip.id, r);
      writeFileSync(`${partial}.tmp`, JSON.stringify({ model: c.name, settings, clips: [...saved.values()] } satisfies PartialFile));
      renameSync(`${partial}.tmp`, partial);
    }
    o.onClip?.(i + 1, clips.length, clip.id, (Date.now() - t0) / 1000, !!reused);
  }
  const vs = new VoiceScoreAccumulator({ numLayers: c.numLayers, numHeads: c.numHeads, numKvHeads: c.numKvHeads, tokensPerSecond: c.audio.tokensPerSecond });
  const hsSum = new Float64Array(kvHeadCount(c));
  let hsTokens = 0;
  for (const r of results) {
    vs.addClip(r.voice);
    if (!r.sensitivity) throw new Error(`clip ${r.id} has no head sensitivity`);
    r.sensitivity.sum.forEach((s, h) => (hsSum[h] += s));
    hsTokens += r.sensitivity.tokens;
  }
  const heads = buildHeadsFile({
    model: c.name, numLayers: c.numLayers, numKvHeads: c.numKvHeads,
    voiceScore: vs.result().voiceScore, headSensitivity: Array.from(hsSum, (s) => s / (hsTokens || 1)), sensitivityEstimator: 'finite-difference',
    clipLengths: results.map((r) => r.audioLength), segmentLength: segmentLength(c),
  });
  writeFileSync(out, JSON.stringify(heads, null, 1) + '\n');
  rmSync(partial, { force: true });
  return heads;
}
