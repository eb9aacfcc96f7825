/**
 * A model folder with random weights and a linear ONNX encoder (written by hand: no torch
 * needed), in the shipped model's shapes: the CLI, the eval, the worker and the demo run the
 * real engine end to end on it before, and independently of, the trained model. Transcripts
 * are gibberish and generation runs to the length guard; only the plumbing is under test.
 *   npx tsx scripts/random-model.ts DIR   (then: wnw transcribe X.wav --model DIR,
 *   or WNW_E2E_MODEL=/DIR-under-the-repo/ npx playwright test e2e/demo.spec.ts)
 */
import '../src/platform/node-host.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decoderTensorShapes } from '../src/model/config.js';
import { referenceConfig, rng, randomArray } from '../src/model/testing.js';
import { encodeSafeTensors } from '../src/model/safetensors.js';

const out = process.argv[2] ?? '/tmp/wnw-rand';
mkdirSync(out, { recursive: true });
const c = referenceConfig();
const rand = rng(7);
const tensors: Record<string, { data: Float32Array; shape: number[] }> = {};
for (const [name, shape] of decoderTensorShapes(c)) {
  const n = shape.reduce((a, b) => a * b, 1);
  tensors[name] = { data: name.includes('norm') ? new Float32Array(n).fill(1) : randomArray(n, 0.08, rand), shape };
}
writeFileSync(join(out, 'decoder.safetensors'), new Uint8Array(encodeSafeTensors(tensors)));
const a = c.audio;
writeFileSync(
  join(out, 'config.json'),
  JSON.stringify({
    name: 'wnw-rand',
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_layers: c.numLayers,
    num_heads: c.numHeads,
    num_kv_heads: c.numKvHeads,
    head_dim: c.headDim,
    rope_theta: c.ropeTheta,
    rms_norm_eps: c.rmsNormEps,
    max_positions: c.maxPositions,
    tokens: c.tokens,
    instruction: c.instruction,
    audio: {
      sample_rate: a.sampleRate,
      n_fft: a.nFft,
      win_length: a.winLength,
      hop_length: a.hopLength,
      n_mels: a.nMels,
      f_min: a.fMin,
      f_max: a.fMax,
      mel_floor: a.melFloor,
      mel_mean: a.melMean,
      mel_std: a.melStd,
      frames_per_token: a.framesPerToken,
      tokens_per_second: a.tokensPerSecond,
      encoder_window_frames: a.encoderWindowFrames,
    },
  }),
);
const pieces = ['<pad>', '<s>', '</s>', '<|transcribe|>', '<|en|>', '<|x|>', '<unk>'];
const letters = 'abcdefghijklmnopqrstuvwxyz';
for (let i = pieces.length; i < c.vocabSize; i++)
  pieces.push((i % 3 === 0 ? '\u2581' : '') + letters[i % 26] + letters[(i * 7) % 26] + i);
writeFileSync(
  join(out, 'tokenizer.json'),
  JSON.stringify({ type: 'sentencepiece', model: 'x', pieces, bos: 1, eos: 2, pad: 0, unk: 6 }),
);

// encoder.onnx by hand: mel [1, 80, T] -> Transpose -> Reshape [1, -1, 640] -> MatMul W [640, 256] -> embeddings.
const enc = new TextEncoder();
const varint = (n: number | bigint) => {
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n;
  const b: number[] = [];
  do {
    let x = Number(v & 0x7fn);
    v >>= 7n;
    if (v) x |= 0x80;
    b.push(x);
  } while (v);
  return b;
};
const key = (f: number, w: number) => varint((f << 3) | w);
const vi = (f: number, n: number | bigint) => [...key(f, 0), ...varint(n)];
const ld = (f: number, bytes: ArrayLike<number>) => [...key(f, 2), ...varint(bytes.length), ...Array.from(bytes)];
const str = (f: number, s: string) => ld(f, enc.encode(s));
const node = (ins: string[], outs: string[], op: string, attrs: number[][] = []) => [
  ...ins.flatMap((s) => str(1, s)),
  ...outs.flatMap((s) => str(2, s)),
  ...str(4, op),
  ...attrs.flatMap((a) => ld(5, a)),
];
const intsAttr = (name: string, v: number[]) => [...str(1, name), ...vi(20, 7), ...v.flatMap((x) => vi(8, x))];
const tensor = (name: string, dims: number[], type: number, raw: Uint8Array) => [
  ...dims.flatMap((d) => vi(1, d)),
  ...vi(2, type),
  ...str(8, name),
  ...ld(9, raw),
];
const dim = (d: number | string) => ld(1, typeof d === 'number' ? vi(1, d) : str(2, d));
const valueInfo = (name: string, dims: (number | string)[]) => [
  ...str(1, name),
  ...ld(2, ld(1, [...vi(1, 1), ...ld(2, dims.flatMap(dim))])),
];
const K = a.nMels * a.framesPerToken;
const W = randomArray(K * c.hiddenSize, 0.5, rand);
const shape = new BigInt64Array([1n, -1n, BigInt(K)]);
const graph = [
  ...ld(1, node(['mel'], ['x'], 'Transpose', [intsAttr('perm', [0, 2, 1])])),
  ...ld(1, node(['x', 'shape'], ['y'], 'Reshape')),
  ...ld(1, node(['y', 'W'], ['embeddings'], 'MatMul')),
  ...str(2, 'enc'),
  ...ld(5, tensor('W', [K, c.hiddenSize], 1, new Uint8Array(W.buffer))),
  ...ld(5, tensor('shape', [3], 7, new Uint8Array(shape.buffer))),
  ...ld(11, valueInfo('mel', [1, a.nMels, 'T'])),
  ...ld(12, valueInfo('embeddings', [1, 'N', c.hiddenSize])),
];
const model = [...vi(1, 8), ...str(2, 'scaffold'), ...ld(7, graph), ...ld(8, [...str(1, ''), ...vi(2, 17)])];
writeFileSync(join(out, 'encoder.onnx'), new Uint8Array(model));

// heads.json: 5 anchors, 10 tidal, the rest fixed, at every budget the demo offers.
const H = c.numLayers * c.numKvHeads;
const ids = [...Array(H).keys()];
const roles: Record<string, unknown> = {};
for (const b of ['0.1', '0.2', '0.4', '0.6', '0.8']) {
  roles[b] = {
    anchors: ids.slice(0, 5),
    tidal: ids.slice(5, 15),
    fixed: ids.slice(15),
    retention: ids.map((i) => (i < 5 ? 1 : Number(b))),
    lambda: 1,
    measuredRGpu: Number(b),
  };
}
writeFileSync(
  join(out, 'heads.json'),
  JSON.stringify({
    model: 'wnw-rand',
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: ids.map((i) => 1 - i / H),
    headSensitivity: ids.map(() => 1),
    roles,
  }),
);
console.log('wrote', out);
