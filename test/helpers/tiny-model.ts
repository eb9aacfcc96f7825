/**
 * A small random model folder for integration tests: config.json, decoder.safetensors,
 * tokenizer.json, encoder.onnx (a linear map of stacked mel frames, built with python's
 * onnx package) and heads.json (random scores, roles fitted as calibration does).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeSafeTensors } from '../../src/model/safetensors.js';
import { decoderTensorShapes, kvHeadCount, segmentLength } from '../../src/model/config.js';
import { randomArray, referenceConfig, rng } from '../../src/model/testing.js';
import { buildHeadsFile } from '../../src/calibrate/heads-file.js';
import { tempDir } from './temp.js';

export const PY = '/usr/bin/python3';

export function pythonHasOnnx(): boolean {
  try {
    execFileSync(PY, ['-c', 'import onnx, numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function writeTinyModel(opts: { layers?: number; vocab?: number } = {}): string {
  const dir = tempDir('wnw-tiny-');
  const vocab = opts.vocab ?? 64;
  const c = referenceConfig({ numLayers: opts.layers ?? 2, vocabSize: vocab, hiddenSize: 64, intermediateSize: 128 });
  const config = {
    name: 'tiny-random',
    vocab_size: vocab,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_layers: c.numLayers,
    num_heads: c.numHeads,
    num_kv_heads: c.numKvHeads,
    head_dim: c.headDim,
    rope_theta: c.ropeTheta,
    rms_norm_eps: c.rmsNormEps,
    max_positions: c.maxPositions,
    tokens: { bos: 1, eos: 2, pad: 0 },
    instruction: [3, 4],
    audio: {
      sample_rate: 16000,
      n_fft: 512,
      win_length: 400,
      hop_length: 160,
      n_mels: 80,
      f_min: 0,
      f_max: 8000,
      mel_floor: 1e-6,
      mel_mean: -4,
      mel_std: 4,
      frames_per_token: 8,
      tokens_per_second: 12.5,
      encoder_window_frames: 1600,
    },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const r = rng(42);
  const tensors: Record<string, { data: Float32Array; shape: number[] }> = {};
  for (const [name, shape] of decoderTensorShapes({ ...c, instruction: [3, 4] })) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data =
      shape.length === 1
        ? randomArray(n, 0.1, r).map((x) => x + 1)
        : randomArray(n, name.startsWith('embed') ? 1 : Math.sqrt(3 / shape[1]), r);
    tensors[name] = { data, shape };
  }
  // Make eos unlikely so runs reach the length guard or a cancel deterministically.
  const lm = tensors['lm_head.weight'].data;
  for (let i = 0; i < c.hiddenSize; i++) lm[2 * c.hiddenSize + i] = 0;
  writeFileSync(join(dir, 'decoder.safetensors'), new Uint8Array(encodeSafeTensors(tensors)));
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const pieces = ['<pad>', '<s>', '</s>', '<transcribe>', '<|>', '<unk>'];
  for (let i = pieces.length; i < vocab; i++)
    pieces.push((i % 3 === 0 ? '\u2581' : '') + letters[i % 26] + letters[(i * 7) % 26]);
  writeFileSync(
    join(dir, 'tokenizer.json'),
    JSON.stringify({ type: 'sentencepiece', model: 'bpe', pieces, bos: 1, eos: 2, pad: 0, unk: 5 }),
  );
  const K = 8 * 80;
  const script = `
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
W = (rng.standard_normal((${K}, ${c.hiddenSize})) / np.sqrt(${K})).astype(np.float32)
g = helper.make_graph([
  helper.make_node('Transpose', ['mel'], ['mt'], perm=[0, 2, 1]),
  helper.make_node('Reshape', ['mt', 'shape'], ['grouped']),
  helper.make_node('MatMul', ['grouped', 'W'], ['embeddings']),
], 'tiny', [helper.make_tensor_value_info('mel', TensorProto.FLOAT, [1, 80, 'T'])],
  [helper.make_tensor_value_info('embeddings', TensorProto.FLOAT, [1, 'N', ${c.hiddenSize}])],
  [numpy_helper.from_array(np.array([1, -1, ${K}], dtype=np.int64), 'shape'), numpy_helper.from_array(W, 'W')])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, ${JSON.stringify(join(dir, 'encoder.onnx'))})
`;
  execFileSync(PY, ['-c', script], { stdio: 'inherit' });
  const heads = kvHeadCount(c);
  const hr = rng(7);
  const file = buildHeadsFile({
    model: 'tiny-random',
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: Array.from({ length: heads }, () => hr()),
    headSensitivity: Array.from({ length: heads }, () => hr()),
    clipLengths: [250],
    segmentLength: segmentLength(c),
  });
  writeFileSync(join(dir, 'heads.json'), JSON.stringify(file));
  return dir;
}

/** A WAV (PCM16) of a few tones with noise. */
export function toneWav(seconds: number, rate = 22050): Uint8Array {
  const n = Math.round(seconds * rate);
  const buf = new ArrayBuffer(44 + 2 * n);
  const v = new DataView(buf);
  const w = (o: number, s: string) => [...s].forEach((ch, i) => v.setUint8(o + i, ch.charCodeAt(0)));
  w(0, 'RIFF');
  v.setUint32(4, 36 + 2 * n, true);
  w(8, 'WAVE');
  w(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true);
  v.setUint16(22, 1, true);
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  w(36, 'data');
  v.setUint32(40, 2 * n, true);
  const r = rng(3);
  for (let i = 0; i < n; i++) {
    const t = i / rate;
    const s = 0.3 * Math.sin(2 * Math.PI * (220 + 100 * Math.floor(t)) * t) + 0.05 * (r() - 0.5);
    v.setInt16(44 + 2 * i, Math.round(s * 32767), true);
  }
  return new Uint8Array(buf);
}
