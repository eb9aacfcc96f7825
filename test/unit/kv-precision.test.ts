/** f16 KV storage: the conversion the CPU backend mirrors the GPU's pack2x16float with. */
import { describe, expect, it } from 'vitest';
import { f16Bits, f16Value } from '../../src/model/f16.js';
import { packF16, roundF16 } from '../../src/kv/precision.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { OffloadStore } from '../../src/kv/offload.js';
import { kvHeadCount, segmentLength } from '../../src/model/config.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';

describe('f16 conversion', () => {
  it('round-trips every finite binary16 value exactly', () => {
    const bad: number[] = [];
    for (let h = 0; h < 65536; h++) {
      const e = (h >>> 10) & 0x1f;
      if (e === 0x1f) continue; // inf, NaN
      if (f16Bits(f16Value(h)) !== h) bad.push(h);
    }
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it('rounds to nearest, ties to even, also for subnormals and at overflow', () => {
    const bad: string[] = [];
    for (let h = 0; h < 0x7bff; h++) {
      const a = f16Value(h);
      const b = f16Value(h + 1);
      const mid = (a + b) / 2; // exact in f32: two more bits than binary16
      const want = h % 2 === 0 ? h : h + 1;
      if (f16Bits(mid) !== want) bad.push(`tie ${h}`);
      if (f16Bits(a + (b - a) * 0.49) !== h || f16Bits(a + (b - a) * 0.51) !== h + 1) bad.push(`near ${h}`);
      if (f16Bits(-mid) !== (want | 0x8000)) bad.push(`negative tie ${h}`);
    }
    expect(bad.slice(0, 5)).toEqual([]);
    expect(f16Bits(65504)).toBe(0x7bff);
    expect(f16Bits(65520)).toBe(0x7c00); // halfway to the next binade rounds to infinity
    expect(f16Bits(1e-9)).toBe(0);
    expect(f16Bits(Number.NaN) & 0x7c00).toBe(0x7c00);
  });

  it('packs and rounds arrays', () => {
    const x = Float32Array.from([1, -2.5, 0.1, 3.14159, 1e-5, 70000]);
    const bits = packF16(x, x.length);
    const out = new Float32Array(x.length);
    roundF16(x, x.length, out);
    for (let i = 0; i < x.length; i++) expect(out[i]).toBe(Math.fround(f16Value(bits[i])));
    expect(out[0]).toBe(1);
    expect(Math.abs(out[3] - 3.14159)).toBeLessThan(2e-3);
    expect(out[5]).toBe(Infinity);
  });
});

describe('CPU backend with an f16 pool', () => {
  const config = referenceConfig({ numLayers: 2, name: 'small' });
  const weights = randomDecoderWeights(config, 7);
  const N = 120;
  const request = { decodeHeads: [0, 5], prefillQueries: 3 };
  const heads = kvHeadCount(config);
  const all = Int32Array.from({ length: N }, (_, i) => i);
  const half = all.filter((p) => p % 2 === 0);

  async function run(kvPrecision: 'f32' | 'f16') {
    const be = new CpuBackend(config, weights, { kvPrecision });
    const pre = await be
      .open({ audioLength: N, maxNewTokens: 10, request, returnLogits: true })
      .prefill(randomEmbeddings(config, N, 3));
    const session = await pre.place({ heads: Array.from({ length: heads }, () => ({ gpu: half, cpu: all })) });
    const logits: Float32Array[] = [];
    let token = pre.token;
    let moved = 0;
    let recalled = 0;
    for (let i = 0; i < 8; i++) {
      const r = await session.step(token);
      logits.push(r.logits!);
      token = r.token;
      if (i === 3) {
        const t = await session.apply({
          recall: [{ head: 1, positions: all.filter((p) => p % 2 === 1 && p < 50) }],
          release: [],
        });
        moved = t.bytesToGpu;
        recalled = t.recalledPositions;
      }
    }
    const stats = session.residency();
    session.close();
    return { logits, moved, recalled, stats };
  }

  it("attends in the prefill to K/V rounded as the pool holds them: the first layer's keys are the f32 prefill's, rounded", async () => {
    const keysOf = async (kvPrecision: 'f32' | 'f16') => {
      const be = new CpuBackend(config, weights, { kvPrecision });
      const pre = await be
        .open({ audioLength: N, maxNewTokens: 4, request: { ...request, prefillKeys: true } })
        .prefill(randomEmbeddings(config, N, 3));
      pre.close();
      return pre.observation.keys!;
    };
    const [a, b] = [await keysOf('f32'), await keysOf('f16')];
    const rounded = (x: Float32Array) => {
      const out = new Float32Array(x.length);
      roundF16(x, x.length, out);
      return out;
    };
    // Layer 0's K comes before any attention: exactly the f32 keys, rounded.
    for (let kh = 0; kh < config.numKvHeads; kh++) expect(b[kh]).toEqual(rounded(a[kh]));
    // Every layer's keys are f16 values, and past layer 0 they differ beyond the rounding (the earlier layers attended to rounded K/V).
    for (const k of b) expect(k).toEqual(rounded(k));
    const last = b.length - 1;
    expect(b[last]).not.toEqual(rounded(a[last]));
  });

  it('decodes what the f32 pool decodes up to f16 rounding, with half the bytes', async () => {
    const a = await run('f32');
    const b = await run('f16');
    for (let i = 0; i < a.logits.length; i++) {
      let err = 0;
      let norm = 0;
      for (let j = 0; j < a.logits[i].length; j++) {
        err += (a.logits[i][j] - b.logits[i][j]) ** 2;
        norm += a.logits[i][j] ** 2;
      }
      // Rounded, not the same: f16 keeps ~3 significant digits of each key and value.
      expect(err / norm).toBeGreaterThan(0);
      expect(err / norm).toBeLessThan(1e-5);
    }
    expect(b.recalled).toBe(25);
    expect(a.moved).toBe(25 * 8 * config.headDim);
    expect(b.moved).toBe(25 * 4 * config.headDim);
    const P = segmentLength(config);
    expect(a.stats.gpuBytesInUse / (P * (8 * config.headDim + 4))).toBe(
      b.stats.gpuBytesInUse / (P * (4 * config.headDim + 4)),
    );
    // The CPU copies are f16 too.
    expect(b.stats.cpuBytes).toBe(a.stats.cpuBytes / 2);
  });
});

describe('offload store with f16 rows', () => {
  it('keeps CPU copies as f16 in half the bytes and returns exactly the rounded values', () => {
    const hd = 8;
    const a = new OffloadStore(hd, 100, 1024, 4);
    const b = new OffloadStore(hd, 100, 1024, 2);
    const k = Float32Array.from({ length: hd }, (_, i) => Math.sin(i + 1) * 3);
    const v = Float32Array.from({ length: hd }, (_, i) => Math.cos(i + 1) / 7);
    for (let p = 0; p < 90; p++) for (const s of [a, b]) s.put(p % 3, p, k, 0, v, 0);
    expect(b.bytes).toBe(a.bytes / 2);
    const gk = new Float32Array(hd);
    const gv = new Float32Array(hd);
    b.get(2, 89, gk, 0, gv, 0);
    const rk = new Float32Array(hd);
    const rv = new Float32Array(hd);
    roundF16(k, hd, rk);
    roundF16(v, hd, rv);
    expect(Array.from(gk)).toEqual(Array.from(rk));
    expect(Array.from(gv)).toEqual(Array.from(rv));
  });
});
