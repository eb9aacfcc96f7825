import { describe, expect, it } from 'vitest';
import { f16Bits, f16Value } from '../../src/model/f16.js';
import { matvec } from '../../src/reference/ops.js';
import { randomArray, rng } from '../../src/model/testing.js';
import {
  Q4_GROUP,
  dequantize,
  dequantizeQ4,
  dequantizeRow,
  pack,
  packF16,
  packF32,
  q4Code,
  q4Scale,
  quantizeQ4,
  quantizeTensor,
  referenceMatmul,
  referenceMatvec,
  roundBf16,
  rowBytes,
  rowWords,
  sliceRows,
  splitRows,
} from '../../src/model/quant.js';
import { ModelLoadError } from '../../src/errors.js';

/** Roughly Gaussian (sum of 4 uniforms), bf16-rounded, scaled like a trained projection. */
function weights(n: number, seed: number, scale = 0.02): Float32Array {
  const r = rng(seed);
  const w = new Float32Array(n);
  for (let i = 0; i < n; i++) w[i] = (r() + r() + r() + r() - 2) * scale;
  return roundBf16(w);
}

describe('bf16 and f16', () => {
  it('rounds to bf16 to nearest, ties to even', () => {
    const a = new Float32Array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -0.1]);
    roundBf16(a);
    expect(a[0]).toBe(1); // tie: down to even
    expect(a[1]).toBe(1 + 2 ** -6); // tie: up to even
    expect(a[2]).toBe(1 + 2 ** -7);
    expect(new Uint32Array(a.buffer)[3] & 0xffff).toBe(0);
  });

  it('packs two f16 per word, element 2i low, and round-trips bf16 weights exactly', () => {
    const w = weights(4 * 64, 1);
    const m = packF16(w, 4, 64);
    expect(m.data.length).toBe(4 * rowWords('f16', 64));
    expect(m.data[0] & 0xffff).toBe(f16Bits(w[0]));
    expect(m.data[0] >>> 16).toBe(f16Bits(w[1]));
    const back = dequantize(m);
    for (let i = 0; i < w.length; i++) {
      if (Math.abs(w[i]) >= 2 ** -14)
        expect(back[i]).toBe(w[i]); // f16 normals hold every bf16 value
      else expect(Math.abs(back[i] - w[i])).toBeLessThanOrEqual(2 ** -25);
    }
  });

  it('f32 packing keeps the bits', () => {
    const w = weights(8 * 16, 2);
    expect(dequantize(packF32(w, 8, 16))).toEqual(w);
  });
});

describe('q4 layout', () => {
  it('packs codes low nibble first, scales two per word after the codes, rows padded to vec4s', () => {
    // Group 0: -4 .. 3.5 in steps of 0.5: m = -4, scale = -4 / -8 = 0.5, codes 0..15.
    // Group 1: 3.5 .. -4: the same scale, codes 15..0.
    // Group 2: group 0 negated: m = 4, scale = -0.5, codes 0..15 again.
    const cols = 96;
    const w = new Float32Array(cols);
    for (let i = 0; i < 32; i++) {
      w[i] = -4 + 0.5 * (i % 16);
      w[32 + i] = 3.5 - 0.5 * (i % 16);
      w[64 + i] = -w[i];
    }
    const m = quantizeQ4(w, 1, cols);
    expect(rowWords('q4', cols)).toBe(12 + 4);
    const hex = (a: Uint32Array) => [...a].map((v) => v.toString(16).padStart(8, '0'));
    expect(hex(m.data.subarray(0, 4))).toEqual(['76543210', 'fedcba98', '76543210', 'fedcba98']);
    expect(hex(m.data.subarray(4, 8))).toEqual(['89abcdef', '01234567', '89abcdef', '01234567']);
    expect(hex(m.data.subarray(8, 12))).toEqual(['76543210', 'fedcba98', '76543210', 'fedcba98']);
    expect(m.data[12]).toBe((f16Bits(0.5) | (f16Bits(0.5) << 16)) >>> 0);
    expect(m.data[13]).toBe(f16Bits(-0.5));
    expect([...m.data.subarray(14, 16)]).toEqual([0, 0]); // padding
    expect([q4Scale(m, 0, 0), q4Scale(m, 0, 1), q4Scale(m, 0, 2)]).toEqual([0.5, 0.5, -0.5]);
    expect(q4Code(m, 0, 3)).toBe(3);
    expect(q4Code(m, 0, 35)).toBe(12);
    expect(dequantizeQ4(m)).toEqual(w);
  });

  it('row sizes: 4.5 bits per weight, 16-byte rows', () => {
    expect(rowBytes('q4', 3072)).toBe(1728);
    expect(rowBytes('q4', 8192)).toBe(4608);
    expect(rowBytes('q4', 2048)).toBe(1152);
    expect(rowBytes('q4', 96)).toBe(64); // 48 bytes of codes, 3 scales padded to 16 bytes
    expect(rowBytes('f16', 3072)).toBe(6144);
    for (const c of [32, 96, 160, 3072, 11008]) expect(rowWords('q4', c) % 4).toBe(0);
  });

  it("rejects K that is not a multiple of the format's unit, and non-finite weights", () => {
    expect(() => quantizeQ4(new Float32Array(2 * 48), 2, 48)).toThrow(/multiple of 32/);
    expect(() => packF16(new Float32Array(2 * 12), 2, 12)).toThrow(/multiple of 8/);
    expect(() => packF32(new Float32Array(6), 1, 6)).toThrow(/multiple of 4/);
    expect(() => quantizeQ4(new Float32Array(10), 1, 32)).toThrow(/needs 32 values/);
    const bad = weights(64, 3);
    bad[40] = NaN;
    expect(() => quantizeQ4(bad, 1, 64)).toThrow(/\[0, 40\].*finite/);
    bad[40] = 1e6;
    expect(() => quantizeQ4(bad, 1, 64)).toThrow(/f16 scale/);
  });

  it('a zero group has scale 0 and code 8', () => {
    const w = new Float32Array(64);
    w[40] = 0.25;
    const m = quantizeQ4(w, 1, 64);
    expect(q4Scale(m, 0, 0)).toBe(0);
    for (let c = 0; c < 32; c++) expect(q4Code(m, 0, c)).toBe(8);
    // Zeros of a group with a negative scale come back as -0.
    expect([...dequantize(m)].every((v, i) => v === w[i])).toBe(true);
  });
});

describe('q4 quantiser', () => {
  /** Every element against the bound the header states, from the stored scale. */
  function checkBound(w: Float32Array, rows: number, cols: number): { nmse: number; codes: Set<number> } {
    const m = quantizeQ4(w, rows, cols);
    const back = dequantize(m);
    const codes = new Set<number>();
    const bad: string[] = [];
    let num = 0;
    let den = 0;
    for (let r = 0; r < rows; r++) {
      for (let g = 0; g < cols / Q4_GROUP; g++) {
        const s = q4Scale(m, r, g);
        let am = 0;
        let ext = 0;
        let minCode = 15;
        for (let j = 0; j < Q4_GROUP; j++) {
          const i = r * cols + g * Q4_GROUP + j;
          if (Math.abs(w[i]) > am) {
            am = Math.abs(w[i]);
            ext = i;
          }
          const c = q4Code(m, r, g * Q4_GROUP + j);
          codes.add(c);
          minCode = Math.min(minCode, c);
          if (back[i] !== (c - 8) * s) bad.push(`[${i}] decodes to ${back[i]}`);
          const t = w[i] / s;
          const err = Math.abs(w[i] - back[i]);
          // Half a step, or (t - 7) steps where the opposite sign clamps at +7.
          if (err > Math.max(0.5, t - 7) * Math.abs(s) * (1 + 1e-6)) bad.push(`[${i}] w=${w[i]} err=${err} step=${s}`);
          num += err * err;
          den += w[i] * w[i];
        }
        // The extreme element takes code 0, within the f16 rounding of its scale (half an
        // ulp: 2^-11 relative, or 2^-25 absolute for subnormal scales).
        const sErr = Math.max((am / 8) * 2 ** -11, 2 ** -25);
        expect(minCode).toBe(0);
        expect(q4Code(m, r, ext - r * cols)).toBe(0);
        expect(Math.abs(back[ext] - w[ext])).toBeLessThanOrEqual(8 * sErr);
        expect(Math.abs(s)).toBeLessThanOrEqual(am / 8 + sErr);
      }
    }
    expect(bad.slice(0, 5)).toEqual([]);
    return { nmse: num / den, codes };
  }

  it('stays within half a step (a step when clamped), uses all 16 codes, NMSE as on Gaussian weights', () => {
    const { nmse, codes } = checkBound(weights(64 * 512, 4), 64, 512);
    expect(codes.size).toBe(16);
    // Near-Gaussian weights: 7.4e-3 measured on 6.4 M Gaussian samples (MLC's |m|/7: 9.4e-3).
    expect(nmse).toBeGreaterThan(5e-3);
    expect(nmse).toBeLessThan(8e-3);
  });

  it('holds the bound with scales in the f16 subnormal range', () => {
    checkBound(weights(8 * 64, 5, 1e-5), 8, 64);
  });

  it('is a function of each row alone (row parts quantise the same as the whole)', () => {
    const w = weights(8 * 96, 6);
    const whole = quantizeQ4(w, 8, 96);
    const part = quantizeQ4(w.subarray(3 * 96, 7 * 96), 4, 96);
    expect(sliceRows(whole, 3, 4).data).toEqual(part.data);
  });
});

describe('references', () => {
  it('matvec and matmul over each format equal f64 products of the dequantised weights', () => {
    const rows = 37;
    const cols = 96;
    const w = weights(rows * cols, 7);
    const r = rng(8);
    const x = randomArray(3 * cols + 4, 1, r);
    for (const f of ['f32', 'f16', 'q4'] as const) {
      const m = pack(f, w, rows, cols);
      const dq = dequantize(m);
      const y = referenceMatvec(m, x, 4);
      const f32y = new Float32Array(rows);
      matvec(dq, rows, cols, x, f32y, 4);
      for (let i = 0; i < rows; i++) {
        let acc = 0;
        for (let c = 0; c < cols; c++) acc += dq[i * cols + c] * x[4 + c];
        expect(y[i]).toBe(Math.fround(acc));
        expect(Math.abs(f32y[i] - y[i])).toBeLessThan(1e-5);
      }
      const Y = referenceMatmul(m, x.subarray(4), 3);
      for (let n = 0; n < 3; n++) {
        const yn = referenceMatvec(m, x, 4 + n * cols);
        for (let i = 0; i < rows; i++) expect(Y[n * rows + i]).toBe(yn[i]);
      }
    }
  });

  it('dequantizeRow writes at an offset', () => {
    const w = weights(2 * 64, 9);
    const m = quantizeQ4(w, 2, 64);
    const out = new Float32Array(70);
    dequantizeRow(m, 1, out, 6);
    expect(out.subarray(6)).toEqual(dequantize(m).subarray(64));
    expect(f16Value(f16Bits(q4Scale(m, 1, 1)))).toBe(q4Scale(m, 1, 1));
  });
});

describe('row splits', () => {
  it('splits a matrix larger than a binding into parts of 64-row multiples that cover it', () => {
    const MiB = 2 ** 20;
    for (const [f, rows, cols, cap, n] of [
      ['q4', 131_072, 3072, 64 * MiB, 4],
      ['q4', 151_936, 2048, 64 * MiB, 3],
      ['f16', 131_072, 3072, 128 * MiB, 7],
      ['q4', 100, 3072, 128 * MiB, 1],
    ] as const) {
      const parts = splitRows(f, rows, cols, cap);
      expect(parts.length).toBe(n);
      let next = 0;
      for (const [i, p] of parts.entries()) {
        expect(p.row0).toBe(next);
        expect(p.rows * rowBytes(f, cols)).toBeLessThanOrEqual(cap);
        if (i < parts.length - 1) expect(p.rows % 64).toBe(0);
        next += p.rows;
      }
      expect(next).toBe(rows);
    }
    expect(() => splitRows('f32', 1000, 3072, 64 * 3072 * 4 - 1)).toThrow(/binding limit/);
  });
});

describe('quantizeTensor', () => {
  it('stores matrices in the target format, or the next one their K allows', () => {
    const w = weights(16 * 96, 10);
    const q = quantizeTensor('layers.0.mlp.down_proj.weight', w, [16, 96]);
    expect([q.format, q.rows, q.cols, q.shape]).toEqual(['q4', 16, 96, [16, 96]]);
    expect(q.data).toEqual(quantizeQ4(w, 16, 96).data);
    expect(quantizeTensor('a', weights(4 * 40, 11), [4, 40]).format).toBe('f16');
    expect(quantizeTensor('a', weights(4 * 12, 12), [4, 12]).format).toBe('f32');
    expect(quantizeTensor('a', w, [16, 96], 'f16').format).toBe('f16');
    expect(quantizeTensor('a', w, [16, 96], 'f32').format).toBe('f32');
  });

  it('keeps vectors and other ranks in f32', () => {
    const v = weights(3 * 5 * 7, 13);
    for (const shape of [[105], [3, 5, 7]]) {
      const q = quantizeTensor('model.norm.weight', v, shape);
      expect([q.format, q.shape]).toEqual(['f32', shape]);
      expect(new Float32Array(q.data.buffer)).toEqual(v);
    }
  });

  it('names the tensor and file in MODEL_LOAD errors', () => {
    const w = weights(4 * 64, 14);
    expect(() => quantizeTensor('lm_head.weight', w, [4, 65], 'q4', 'model-00002-of-00002.safetensors')).toThrow(
      ModelLoadError,
    );
    w[7] = Infinity;
    let err: unknown;
    try {
      quantizeTensor('lm_head.weight', w, [4, 64], 'q4', 'model-00002-of-00002.safetensors');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as ModelLoadError).code).toBe('MODEL_LOAD');
    expect((err as Error).message).toMatch(/model-00002-of-00002\.safetensors \(tensor lm_head\.weight\).*finite/);
    expect(() => quantizeTensor('x', weights(4 * 6, 15), [4, 6])).toThrow(/multiple of 4/);
  });
});
