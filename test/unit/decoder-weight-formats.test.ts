import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { kvHeadCount, type ModelConfig } from '../../src/model/config.js';
import { decoderShapeConfig, randomDecoderWeights, randomEmbeddings } from '../../src/model/testing.js';
import {
  decoderWeightBytes,
  packDecoderWeights,
  packedFormats,
  packedWeightBytes,
  unpackDecoderWeights,
  weightsInFormat,
} from '../../src/model/packed-weights.js';
import { dequantize, packF16, quantizeQ4, type WeightFormat } from '../../src/model/quant.js';
import type { DecoderWeights } from '../../src/model/weights.js';

const voxtral = decoderShapeConfig('voxtral');
const qwenAudio = decoderShapeConfig('qwen2_audio');

/** What one upstream matrix becomes in `format`: dequantize(pack(w)). */
function roundTrip(format: WeightFormat, w: Float32Array, rows: number, cols: number): Float32Array {
  return format === 'q4'
    ? dequantize(quantizeQ4(w, rows, cols))
    : format === 'f16'
      ? dequantize(packF16(w, rows, cols))
      : w;
}

function expectSameValues(a: Float32Array, b: Float32Array): void {
  expect(a.length).toBe(b.length);
  let diff = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) diff++;
  expect(diff).toBe(0);
}

function nmse(ref: Float32Array, got: Float32Array): number {
  let e = 0;
  let n = 0;
  for (let i = 0; i < ref.length; i++) {
    e += (ref[i] - got[i]) ** 2;
    n += ref[i] ** 2;
  }
  return e / n;
}

async function decode(c: ModelConfig, w: DecoderWeights, format: WeightFormat, steps: number) {
  const A = 40;
  const be = new CpuBackend(c, w, { weightFormat: format });
  const pre = await be
    .open({
      audioLength: A,
      maxNewTokens: steps + 1,
      request: { decodeHeads: [], prefillQueries: c.instruction.length },
      returnLogits: true,
    })
    .prefill(randomEmbeddings(c, A, 5));
  const all = Int32Array.from({ length: A }, (_, i) => i);
  const session = await pre.place({
    heads: Array.from({ length: kvHeadCount(c) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
  });
  const tokens = [pre.token];
  const logits = [pre.logits!];
  for (let s = 0; s < steps; s++) {
    const r = await session.step(tokens[tokens.length - 1]);
    tokens.push(r.token);
    logits.push(r.logits!);
  }
  session.close();
  return { tokens, logits };
}

describe('decoder weights in a weight format', () => {
  it('packs Wqkv and gate_up so that their rows are the upstream matrices in that format, and unpacks to exactly those values', () => {
    const c = voxtral;
    const w = randomDecoderWeights(c, 3);
    const D = c.hiddenSize;
    const QD = c.numHeads * c.headDim;
    const KVD = c.numKvHeads * c.headDim;
    const I = c.intermediateSize;
    for (const format of ['f16', 'q4'] as const) {
      const p = packDecoderWeights(c, w, format);
      expect(packedFormats(p)).toEqual([format]);
      const u = unpackDecoderWeights(c, p);
      const l = w.layers[1];
      const ul = u.layers[1];
      expectSameValues(ul.q, roundTrip(format, l.q, QD, D));
      expectSameValues(ul.k, roundTrip(format, l.k, KVD, D));
      expectSameValues(ul.v, roundTrip(format, l.v, KVD, D));
      expectSameValues(ul.o, roundTrip(format, l.o, D, QD));
      expectSameValues(ul.gate, roundTrip(format, l.gate, I, D));
      expectSameValues(ul.up, roundTrip(format, l.up, I, D));
      expectSameValues(ul.down, roundTrip(format, l.down, D, I));
      expectSameValues(u.embed, roundTrip(format, w.embed, c.vocabSize, D));
      expectSameValues(u.lmHead, roundTrip(format, w.lmHead, c.vocabSize, D));
      // Norms stay f32, the same arrays.
      expect(ul.attnNorm).toBe(l.attnNorm);
      expect(u.norm).toBe(w.norm);
      // The format changes the weights, within its error: f16 ~1e-7, q4 ~1e-2 (Gaussian 7e-3; uniform less).
      const e = nmse(l.gate, ul.gate);
      expect(e).toBeGreaterThan(0);
      expect(e).toBeLessThan(format === 'q4' ? 2e-2 : 1e-6);
    }
  });

  it('f32 is the weights themselves', () => {
    const w = randomDecoderWeights(voxtral, 3);
    expect(weightsInFormat(voxtral, w, 'f32')).toBe(w);
  });

  it('a matrix whose K q4 cannot take falls back to f16, and the byte count from the config matches the packed weights', () => {
    // qwen2-audio-shaped: intermediate 176 is not a multiple of 32 (down_proj's K).
    const c = qwenAudio;
    const w = randomDecoderWeights(c, 4);
    const p = packDecoderWeights(c, w, 'q4');
    expect(p.layers[0].down.format).toBe('f16');
    expect(p.layers[0].gateUp.format).toBe('q4');
    expect(packedFormats(p).sort()).toEqual(['f16', 'q4']);
    expect(p.layers[0].qkvBias?.length).toBe(c.numHeads * c.headDim + 2 * c.numKvHeads * c.headDim);
    for (const f of ['f32', 'f16', 'q4'] as const) {
      expect(decoderWeightBytes(c, f)).toEqual(packedWeightBytes(packDecoderWeights(c, w, f)));
    }
    const b = decoderWeightBytes(c, 'q4');
    // q4 rows of K = 64: 8 words of codes + 4 of scales (padded) = 48 bytes.
    expect(b.embed).toBe(c.vocabSize * 48);
    expect(b.byFormat.f16).toBe(c.numLayers * c.hiddenSize * 176 * 2);
    expect(b.total).toBe(b.byFormat.f32 + b.byFormat.f16 + b.byFormat.q4);
  });

  it('a tied head shares the packed table (stored and counted once)', () => {
    const c = voxtral;
    const w = randomDecoderWeights(c, 3);
    const tied: DecoderWeights = { ...w, lmHead: w.embed };
    const p = packDecoderWeights(c, tied, 'q4');
    expect(p.lmHead).toBe(p.embed);
    const u = unpackDecoderWeights(c, p);
    expect(u.lmHead).toBe(u.embed);
    expect(packedWeightBytes(p)).toEqual(decoderWeightBytes(c, 'q4', true));
    expect(packedWeightBytes(p).lmHead).toBe(0);
  });

  it('the CPU backend with a weight format decodes exactly the unpacked model', async () => {
    const c = voxtral;
    const w = randomDecoderWeights(c, 11);
    const f32 = await decode(c, w, 'f32', 12);
    for (const format of ['f16', 'q4'] as const) {
      const packed = await decode(c, w, format, 12);
      const explicit = await decode(c, unpackDecoderWeights(c, packDecoderWeights(c, w, format)), 'f32', 12);
      expect(packed.tokens).toEqual(explicit.tokens);
      packed.logits.forEach((l, i) => expectSameValues(l, explicit.logits[i]));
      // ... and a model that is not the f32 one, though close to it.
      const e = nmse(f32.logits[0], packed.logits[0]);
      expect(e).toBeGreaterThan(0);
      expect(e).toBeLessThan(format === 'q4' ? 0.1 : 1e-5);
    }
  });
});

describe('wnw transcribe --weights', () => {
  it('takes f32, f16 or q4 (default f32) and names the choices otherwise', async () => {
    const { parseTranscribeArgs, UsageError } = await import('../../src/cli/args.js');
    expect(parseTranscribeArgs(['a.wav', '--model', '/m']).weights).toBe('f32');
    expect(parseTranscribeArgs(['a.wav', '--model', '/m', '--weights', 'q4']).weights).toBe('q4');
    expect(() => parseTranscribeArgs(['a.wav', '--model', '/m', '--weights', 'int8'])).toThrow(UsageError);
    expect(() => parseTranscribeArgs(['a.wav', '--model', '/m', '--weights', 'int8'])).toThrow(/f32, f16, q4/);
  });
});
