import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { kvHeadCount, type ModelConfig } from '../../src/model/config.js';
import {
  decoderShapeConfig,
  randomArray,
  randomDecoderWeights,
  randomEmbeddings,
  rng,
} from '../../src/model/testing.js';
import {
  concatRows,
  decoderWeightBytes,
  packDecoderWeights,
  packedViews,
  packedWeightBytes,
  unpackDecoderWeights,
  type PackedDecoderWeights,
} from '../../src/model/packed-weights.js';
import { dequantize, packF16, quantizeQ4, type PackedMatrix } from '../../src/model/quant.js';
import type { DecoderWeights } from '../../src/model/weights.js';
import { matmul, matvec } from '../../src/reference/ops.js';
import { matrixRow } from '../../src/reference/matrix.js';

function differing(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let n = 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) n++;
  return n;
}

const packers = {
  f16: packF16,
  q4: quantizeQ4,
} as const;

/** A [rows, cols] matrix at a trained model's scale, packed in `format`. */
function randomPacked(format: 'f16' | 'q4', rows: number, cols: number, seed: number): PackedMatrix {
  return packers[format](randomArray(rows * cols, Math.sqrt(3 / cols), rng(seed)), rows, cols);
}

describe('packed matrices in the CPU products', () => {
  // Voxtral's down_proj [3072, 8192] and q_proj [4096, 3072]: the widths the decoder runs at.
  for (const format of ['f16', 'q4'] as const) {
    for (const [rows, cols] of [
      [3072, 8192],
      [4096, 3072],
    ]) {
      it(`matvec of a ${rows} x ${cols} ${format} matrix is bit for bit the matvec of its dequantised copy`, () => {
        const m = randomPacked(format, rows, cols, rows + cols);
        const x = randomArray(cols, 1, rng(3));
        const want = new Float32Array(rows);
        matvec(dequantize(m), rows, cols, x, want);
        const got = new Float32Array(rows);
        matvec(m, rows, cols, x, got);
        expect(differing(got, want)).toBe(0);
        // Not vacuous: the products are not all zero.
        expect(want.some((v) => v !== 0)).toBe(true);
      });
    }
  }

  it('the lm head past 131k rows (Voxtral 131072, Qwen2-Audio 156032) and an odd row count: matvec and the row lookup', () => {
    const rows = 156_035; // not a multiple of 4 nor of a tile: the tail rows run too
    const cols = 128;
    for (const format of ['f16', 'q4'] as const) {
      const m = randomPacked(format, rows, cols, 9);
      const f32 = dequantize(m);
      const x = randomArray(cols, 1, rng(4));
      const want = new Float32Array(rows);
      matvec(f32, rows, cols, x, want);
      const got = new Float32Array(rows);
      matvec(m, rows, cols, x, got);
      expect(differing(got, want)).toBe(0);
      for (const r of [0, 131_071, 131_072, rows - 1]) {
        const a = new Float32Array(cols);
        matrixRow(m, r, cols, a);
        expect(differing(a, f32.subarray(r * cols, (r + 1) * cols))).toBe(0);
      }
    }
  });

  it('matmul (the prefill) of packed rows is bit for bit the matmul of the dequantised matrix, odd input counts included', () => {
    for (const format of ['f16', 'q4'] as const) {
      for (const [rows, cols, n] of [
        [1030, 3072, 7],
        [3072, 4096, 4],
      ]) {
        const m = randomPacked(format, rows, cols, n);
        const x = randomArray(n * cols, 1, rng(5));
        const want = new Float32Array(n * rows);
        matmul(dequantize(m), rows, cols, x, n, want);
        const got = new Float32Array(n * rows);
        matmul(m, rows, cols, x, n, got);
        expect(differing(got, want)).toBe(0);
      }
    }
  });

  it('a packed matrix used at a shape other than its own is refused', () => {
    const m = randomPacked('q4', 64, 64, 1);
    expect(() => matvec(m, 64, 32, new Float32Array(64), new Float32Array(64))).toThrow(/\[64, 64\] q4 matrix used as/);
  });
});

async function decode(c: ModelConfig, w: DecoderWeights | PackedDecoderWeights, steps: number) {
  const A = 40;
  const be = new CpuBackend(c, w);
  const pre = await be
    .open({
      audioLength: A,
      maxNewTokens: steps + 1,
      request: { decodeHeads: [0, 1], prefillQueries: c.instruction.length },
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
  return { tokens, logits, weightBytes: be.weightBytes() };
}

describe('the CPU backend keeps packed weights packed', () => {
  const cases: [string, ModelConfig, boolean][] = [
    ['voxtral (untied)', decoderShapeConfig('voxtral'), false],
    ['qwen2_audio (q/k/v biases, an f16 fallback under q4)', decoderShapeConfig('qwen2_audio'), false],
    ['voxtral with a tied head', decoderShapeConfig('voxtral'), true],
  ];
  for (const [name, c, tied] of cases) {
    for (const format of ['f16', 'q4'] as const) {
      it(`${name}, ${format}: the same tokens and bit-identical logits as the unpacked model, holding only the packed bytes`, async () => {
        const w0 = randomDecoderWeights(c, 21);
        const w: DecoderWeights = tied ? { ...w0, lmHead: w0.embed } : w0;
        const packed = packDecoderWeights(c, w, format);
        const unpacked = unpackDecoderWeights(c, packed);
        const a = await decode(c, packed, 10);
        const b = await decode(c, unpacked, 10);
        expect(a.tokens).toEqual(b.tokens);
        a.logits.forEach((l, i) => expect(differing(l, b.logits[i])).toBe(0));
        // What it holds is the packed weights, no f32 copy: exactly their bytes, where the
        // unpacked model's backend holds the f32 ones.
        expect(a.weightBytes).toBe(packedWeightBytes(packed).total);
        expect(b.weightBytes).toBe(decoderWeightBytes(c, 'f32', tied).total);
        expect(a.weightBytes).toBeLessThan(b.weightBytes / (format === 'q4' ? 3 : 1.5));
      });
    }
  }

  it('the views share the packed words: no matrix is copied', () => {
    const c = decoderShapeConfig('voxtral');
    const p = packDecoderWeights(c, randomDecoderWeights(c, 2), 'q4');
    const v = packedViews(c, p);
    const l = v.layers[0];
    for (const m of [l.q, l.k, l.v, l.gate, l.up]) {
      expect(m instanceof Float32Array).toBe(false);
      expect((m as PackedMatrix).data.buffer).toBe(
        (m === l.gate || m === l.up ? p.layers[0].gateUp : p.layers[0].qkv).data.buffer,
      );
    }
    expect(v.embed).toBe(p.embed);
    expect(v.lmHead).toBe(p.lmHead);
  });
});

describe('loading a converted folder for the CPU', () => {
  it('stacking parts already adjacent in one buffer is a view of it; other parts are copied', () => {
    const a = randomPacked('q4', 8, 64, 1);
    const b = randomPacked('q4', 4, 64, 2);
    const whole = new Uint32Array(a.data.length + b.data.length);
    whole.set(a.data);
    whole.set(b.data, a.data.length);
    const inPlace = [
      { ...a, data: whole.subarray(0, a.data.length) },
      { ...b, data: whole.subarray(a.data.length) },
    ];
    const viewed = concatRows('x', inPlace);
    expect(viewed.data.buffer).toBe(whole.buffer);
    expect(viewed.rows).toBe(12);
    const copied = concatRows('x', [a, b]);
    expect(copied.data.buffer).not.toBe(a.data.buffer);
    expect(Array.from(copied.data)).toEqual(Array.from(whole));
    // Out of order is not adjacent: copied, in the order asked.
    const swapped = concatRows('x', [inPlace[1], inPlace[0]]);
    expect(swapped.data.buffer).not.toBe(whole.buffer);
    expect(Array.from(swapped.data.subarray(0, b.data.length))).toEqual(Array.from(b.data));
  });

  it('stacks Wqkv and gate_up in one buffer each, and a CPU backend on it holds the packed bytes and no more', async () => {
    const { ensureMiniatures } = await import('../helpers/miniatures.js');
    const { tempDir } = await import('../helpers/temp.js');
    const { convertFolder } = await import('../../src/cli/convert.js');
    const { loadModel } = await import('../../src/model/loader.js');
    const { join } = await import('node:path');
    const out = tempDir('wnw-cpu-packed-');
    await convertFolder({ from: join(await ensureMiniatures(), 'voxtral'), to: out, format: 'q4' });
    const model = await loadModel(out);
    const p = model.packed!;
    const c = model.config;
    const QD = c.numHeads * c.headDim;
    const KVD = c.numKvHeads * c.headDim;
    for (const l of p.layers) {
      // Each stack owns its buffer whole: no part is left in a larger one.
      for (const m of [l.qkv, l.gateUp]) expect(m.data.byteLength).toBe(m.data.buffer.byteLength);
      expect(l.qkv.rows).toBe(QD + 2 * KVD);
      expect(l.gateUp.rows).toBe(2 * c.intermediateSize);
    }
    const buffers = new Set<ArrayBufferLike>();
    for (const m of [p.embed, p.lmHead, ...p.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])])
      buffers.add(m.data.buffer);
    let held = 0;
    for (const b of buffers) held += b.byteLength;
    const matrices = packedWeightBytes(p);
    expect(held).toBe(matrices.total - matrices.byFormat.f32);
    // And a CPU backend on it holds exactly those bytes (plus the f32 norms).
    expect(new CpuBackend(c, p).weightBytes()).toBe(matrices.total);
  }, 300_000);
});

describe('loading our own layout', () => {
  it('the f32 decoder is views into the file buffer read once, not copies beside it', async () => {
    const { encodeSafeTensors } = await import('../../src/model/safetensors.js');
    const { decoderTensorShapes } = await import('../../src/model/config.js');
    const { loadDecoderWeights } = await import('../../src/model/weights.js');
    const c = decoderShapeConfig('voxtral');
    const w = randomDecoderWeights(c, 5);
    const tensors: Record<string, { data: Float32Array; shape: number[] }> = {};
    const byName: Record<string, Float32Array> = {
      'embed_tokens.weight': w.embed,
      'lm_head.weight': w.lmHead,
      'norm.weight': w.norm,
    };
    w.layers.forEach((l, i) => {
      const p = `layers.${i}.`;
      Object.assign(byName, {
        [p + 'attn_norm.weight']: l.attnNorm,
        [p + 'q_proj.weight']: l.q,
        [p + 'k_proj.weight']: l.k,
        [p + 'v_proj.weight']: l.v,
        [p + 'o_proj.weight']: l.o,
        [p + 'mlp_norm.weight']: l.mlpNorm,
        [p + 'gate_proj.weight']: l.gate,
        [p + 'up_proj.weight']: l.up,
        [p + 'down_proj.weight']: l.down,
      });
    });
    for (const [name, shape] of decoderTensorShapes(c)) tensors[name] = { data: byName[name], shape };
    const file = encodeSafeTensors(tensors);
    const got = loadDecoderWeights(c, file);
    for (const a of [got.embed, got.lmHead, got.norm, got.layers[1].q, got.layers[1].down]) expect(a.buffer).toBe(file);
    expect(differing(got.layers[1].gate, w.layers[1].gate)).toBe(0);
    expect(differing(got.embed, w.embed)).toBe(0);
  });
});
