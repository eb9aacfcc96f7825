/**
 * `npm run calibrate`: offline head triage. Runs the reference model teacher-forced on
 * the calibration clips for the Voice Score, takes the Head Sensitivity from PyTorch
 * (training/head_sensitivity.py), and writes heads.json (VS × HS) next to the model,
 * plus heads.voice.json and heads.sensitivity.json for the ablation.
 *
 *   npm run calibrate -- [--model public/models/wnw-ref] [--clips calibration-data]
 *                        [--hs FILE.json] [--limit N]
 *   npm run calibrate -- --model HF_DIR --export-ids IDS.json [--language en]
 *       (prompt and answer ids for training/head_sensitivity.py on a Hugging Face folder)
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kvHeadCount, segmentLength } from '../model/config.js';
import { createAudioRoute } from '../route/audio-route.js';
import { loadModel } from '../model/loader.js';
import { writeAnswerIds } from './answer-ids.js';
import { listCalibrationClips } from './clips.js';
import { buildHeadsFile, parseHeadSensitivity } from './heads-file.js';
import { calibrateClip } from './run.js';
import { VoiceScoreAccumulator } from './voice-score.js';

function arg(name: string, dflt?: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

async function main(): Promise<void> {
  const modelDir = arg('model', 'public/models/wnw-ref')!;
  const clipsDir = arg('clips', 'calibration-data')!;
  const limit = Number(arg('limit', 'Infinity'));
  const idsOut = arg('export-ids');
  if (idsOut) return writeAnswerIds(idsOut, modelDir, clipsDir, limit, arg('language'));
  const language = arg('language');
  const model = await loadModel(modelDir, undefined, { language });
  const c = model.config;
  // Audio reaches the decoder as it does when transcribing: ONNX encoder, or a Hugging Face folder's audio tower.
  const route = await createAudioRoute(model, { file: join(modelDir, 'encoder.onnx') });
  const clips = await listCalibrationClips(clipsDir, limit);
  const vs = new VoiceScoreAccumulator({
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    tokensPerSecond: c.audio.tokensPerSecond,
  });
  const clipLengths: number[] = [];
  const t0 = Date.now();
  for (const [i, clip] of clips.entries()) {
    const r = await calibrateClip(model, (s) => route.encode(s), clip);
    vs.addClip(r.voice);
    clipLengths.push(r.audioLength);
    process.stderr.write(`\rcalibrate: clip ${i + 1}/${clips.length} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
  process.stderr.write('\n');
  const v = vs.result();
  let hsFile = arg('hs');
  let hsDir: string | null = null;
  if (!hsFile) {
    hsDir = mkdtempSync(join(tmpdir(), 'wnw-hs-'));
    hsFile = join(hsDir, 'hs.json');
    process.stderr.write('calibrate: head sensitivity with PyTorch (training/head_sensitivity.py)\n');
    execFileSync(
      '/usr/bin/python3',
      [
        'training/head_sensitivity.py',
        '--model',
        modelDir,
        '--clips',
        clipsDir,
        '--out',
        hsFile,
        ...(language ? ['--language', language] : []),
        ...(Number.isFinite(limit) ? ['--limit', String(limit)] : []),
      ],
      { stdio: 'inherit' },
    );
  }
  const hsJson = JSON.parse(readFileSync(hsFile, 'utf8')) as Record<string, unknown>;
  if (hsDir) rmSync(hsDir, { recursive: true, force: true });
  const hs = parseHeadSensitivity(hsJson['head_sensitivity'] ?? hsJson, kvHeadCount(c));
  for (const ranking of ['product', 'voice', 'sensitivity'] as const) {
    const heads = buildHeadsFile({
      model: c.name,
      numLayers: c.numLayers,
      numKvHeads: c.numKvHeads,
      voiceScore: v.voiceScore,
      headSensitivity: hs,
      ranking,
      clipLengths,
      segmentLength: segmentLength(c),
    });
    const name = ranking === 'product' ? 'heads.json' : `heads.${ranking}.json`;
    writeFileSync(join(modelDir, name), JSON.stringify(heads, null, 1) + '\n');
    process.stderr.write(`calibrate: wrote ${join(modelDir, name)}\n`);
  }
  const top = v.voiceScore
    .map((s, h) => ({ h, s, hs: hs[h] }))
    .sort((a, b) => b.s * b.hs - a.s * a.hs)
    .slice(0, 8);
  console.log(`clips ${v.clips}, tokens ${v.tokens} (skipped ${v.skipped}); top heads by VS×HS:`);
  for (const t of top)
    console.log(
      `  head ${t.h} (layer ${Math.floor(t.h / c.numKvHeads)}, kv ${t.h % c.numKvHeads}): VS ${t.s.toFixed(3)} HS ${t.hs.toExponential(2)}`,
    );
  await route.dispose();
}

main().catch((e) => {
  console.error(`calibrate: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
