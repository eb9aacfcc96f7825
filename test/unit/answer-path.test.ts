/**
 * The answer path's Head Sensitivity (src/calibrate/answer-path.ts, the plain-TS reference
 * the WebGPU triage is checked against) against the same quantity by PyTorch's autograd:
 * training/head_sensitivity.py --answer-path, the reference model's decoder with every
 * layer's keys and values detached, per-token gradients of the transcript's CE. One
 * calibration clip, the shipped model, each head's value.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../src/node.js';
import { loadModel } from '../../src/model/loader.js';
import { createAudioRoute } from '../../src/route/audio-route.js';
import { listCalibrationClips } from '../../src/calibrate/clips.js';
import { answerPathTriage } from '../../src/calibrate/answer-path.js';
import { toMono16k } from '../../src/audio/decode.js';
import { defaultModelDir } from '../../src/cli/args.js';

const PY = '/usr/bin/python3';
/** Relative, per head: the two encoders (ONNX here, PyTorch there) and summation orders differ in f32. */
const TOLERANCE = 2e-3;

describe('the answer path against PyTorch autograd', () => {
  it('gives every KV head the Head Sensitivity head_sensitivity.py --answer-path gives, on a calibration clip', async (ctx) => {
    if (!existsSync(PY)) ctx.skip('needs /usr/bin/python3');
    try {
      execFileSync(PY, ['-c', 'import torch, sentencepiece'], { stdio: 'ignore' });
    } catch {
      ctx.skip('torch or sentencepiece is not installed for /usr/bin/python3');
    }
    const dir = mkdtempSync(join(tmpdir(), 'wnw-answer-path-'));
    try {
      const out = join(dir, 'hs.json');
      execFileSync(
        PY,
        [
          'training/head_sensitivity.py',
          '--model',
          defaultModelDir(),
          '--clips',
          'calibration-data',
          '--limit',
          '1',
          '--answer-path',
          '--out',
          out,
        ],
        { stdio: 'ignore' },
      );
      const py = (JSON.parse(readFileSync(out, 'utf8')) as { head_sensitivity: number[] }).head_sensitivity;
      const model = await loadModel(defaultModelDir());
      const route = await createAudioRoute(model, { file: join(defaultModelDir(), 'encoder.onnx') });
      try {
        const [clip] = await listCalibrationClips('calibration-data', 1);
        const c = model.config;
        const samples = await toMono16k(new Uint8Array(readFileSync(clip.wav)), c.audio.sampleRate);
        const { embeddings, audioLength } = await route.encode(samples);
        const answer = [...model.tokenizer.encode(clip.text), c.stopTokens[0]];
        const ts = answerPathTriage(c, model.weights, embeddings, audioLength, answer);
        const hs = ts.sum.map((s) => s / ts.tokens);
        expect(hs).toHaveLength(py.length);
        const worst = Math.max(...hs.map((x, h) => Math.abs(x - py[h]) / Math.abs(py[h])));
        expect(worst).toBeLessThanOrEqual(TOLERANCE);
      } finally {
        await route.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
