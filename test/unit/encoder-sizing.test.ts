import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BATCH_FRAMES,
  ENCODER_BATCH_BYTES,
  defaultTowerFormat,
  encodeBatch,
  encoderLinears,
  encoderWeightBytes,
  linearFormat,
  projectorWidths,
  towerBytes,
} from '../../src/encoder/sizing.js';
import { ENCODER_SHAPES, randomEncoderTensors } from '../../src/bench/encoder.js';
import { memoryNeed } from '../../src/backend/webgpu/fit.js';
import { memoryMarkdown, memoryTable, isSized } from '../../src/bench/memory.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { decoderShapeConfig } from '../../src/model/testing.js';
import { pack } from '../../src/model/quant.js';
import { WebGpuWhisperEncoder } from '../../src/encoder/webgpu.js';
import type { GpuContext } from '../../src/gpu/device.js';
import type { PipelineCache } from '../../src/gpu/pipelines.js';

const LARGE = ENCODER_SHAPES['whisper-large-v3-shape'];

describe('audio tower sizing', () => {
  it('holds one 30 s window a batch at Whisper-large width, and many of a small tower, within the batch bound', () => {
    const big = encodeBatch(LARGE, voxtral.encoder, 3072, projectorWidths(voxtral.encoder, 3072), 2 ** 31);
    expect(big.windows).toBe(1);
    expect(big.rows).toBe(1500);
    expect(big.bytes).toBeLessThanOrEqual(ENCODER_BATCH_BYTES);
    // The FFN and post buffers are the widest: 5,120 floats a row (the 4 stacked frames and fc1).
    expect(big.maxWidth).toBe(5120);
    expect(Object.fromEntries(big.buffers)['ffn']).toBe(1500 * 5120);
    const small = { ...LARGE, dModel: 64, heads: 2, ffnDim: 128, layers: 1 };
    const few = encodeBatch(small, voxtral.encoder, 96, [96, 96], 2 ** 31);
    expect(few.windows).toBe(DEFAULT_BATCH_FRAMES / voxtral.encoder.windowFrames);
    // Qwen2.5-Omni's 2 s windows: as many as the bound holds.
    const omni = encodeBatch(LARGE, qwen25Omni.encoder, 2048, projectorWidths(qwen25Omni.encoder, 2048), 2 ** 31);
    expect(omni.bytes).toBeLessThanOrEqual(ENCODER_BATCH_BYTES);
    expect(omni.windows).toBeGreaterThan(1);
    expect(encodeBatch(LARGE, qwen25Omni.encoder, 2048, [2048], 2 ** 31, 200 * (omni.windows - 1)).windows).toBe(
      omni.windows - 1,
    );
  });

  it('takes fewer windows where a binding is small, and refuses one window no binding holds', () => {
    const bind = 1500 * 5120 * 4;
    expect(encodeBatch(LARGE, voxtral.encoder, 3072, [3072, 3072], bind).windows).toBe(1);
    expect(() => encodeBatch(LARGE, voxtral.encoder, 3072, [3072, 3072], bind - 4)).toThrow(
      /does not fit the device's/,
    );
  });

  it('counts every byte the GPU encoder uploads: packed Linears, the rest in f32', async () => {
    (globalThis as { GPUBufferUsage?: unknown }).GPUBufferUsage ??= {
      STORAGE: 128,
      COPY_DST: 8,
      COPY_SRC: 4,
      MAP_READ: 1,
      UNIFORM: 64,
    };
    const config = { ...LARGE, dModel: 64, heads: 2, ffnDim: 128, layers: 2 };
    for (const [family, width] of [
      [voxtral, 96],
      [qwen25Omni, 64],
    ] as const) {
      const tensors = randomEncoderTensors(config, family.encoder, width);
      const linears = new Map(encoderLinears(config, family.encoder, () => width).map((l) => [l.name, l]));
      for (const format of ['f32', 'f16', 'q4'] as const) {
        let packed = 0;
        for (const l of linears.values())
          packed += pack(linearFormat(format, l.cols), tensors.get(l.name)!, l.rows, l.cols).data.byteLength;
        const b = encoderWeightBytes(config, family.encoder, width, format);
        expect(b.linears).toBe(packed);
      }
      // Every buffer the GPU encoder uploads, counted by a context that only records sizes.
      for (const format of ['f32', 'q4'] as const) {
        let uploaded = 0;
        const ctx = {
          buffer: (_l: string, size: number) => ((uploaded += size), {}),
          allocating: async (_w: string, _n: number, fn: () => unknown) => fn(),
        };
        await WebGpuWhisperEncoder.create(
          ctx as unknown as GpuContext,
          {} as PipelineCache,
          config,
          family.encoder,
          tensors,
          { weightFormat: format },
        );
        const b = encoderWeightBytes(config, family.encoder, width, format);
        expect(uploaded).toBe(b.linears + b.other);
      }
    }
  });

  it('adds an encode phase: the decoder weights beside the tower and one batch, the peak where it is the larger', () => {
    const c = decoderShapeConfig('voxtral');
    const request = {
      weightFormat: 'q4' as const,
      tied: false,
      audioTokens: 750,
      kvPrecision: 'f16' as const,
      budget: 0.2,
    };
    const without = memoryNeed(c, request);
    expect(without.phases.encode).toBe(without.weightBytes);
    const tower = towerBytes(LARGE, voxtral.encoder, c.hiddenSize, 'f16');
    const withTower = memoryNeed(c, { ...request, audioTower: tower });
    expect(withTower.phases.encode).toBe(without.weightBytes + tower.weightBytes + tower.batchBytes);
    expect(withTower.phases.prefill).toBe(without.phases.prefill);
    expect(withTower.peakBytes).toBe(Math.max(withTower.phases.encode, without.peakBytes));
  });

  it("defaults the tower to f16 beside a q4 decoder, to the decoder's f16 or f32 otherwise, and to q4 where the f16 phase does not fit", () => {
    const phase = (f: string) => (f === 'f16' ? 3e9 : f === 'f32' ? 5e9 : 2e9);
    expect(defaultTowerFormat('q4', phase)).toEqual({ format: 'f16' });
    expect(defaultTowerFormat('f32', phase)).toEqual({ format: 'f32' });
    expect(defaultTowerFormat('f16', phase, 4e9)).toEqual({ format: 'f16' });
    const small = defaultTowerFormat('q4', phase, 2.5e9);
    expect(small.format).toBe('q4');
    expect(small.why).toMatch(/a f16 tower beside the decoder needs 3.00 GB while encoding, over the 2.50 GB/);
  });

  it('reports the encode phase of the released backbones with the tower in f16 and q4, the same at every length', () => {
    const rows = memoryTable('q4', 'f16', [10, 30]).filter(isSized);
    const vox = rows.filter((r) => r.model.startsWith('Voxtral'));
    expect(vox[0].encodeF16).toBe(vox[1].encodeF16);
    for (const r of rows) {
      expect(r.encodeF16).toBeGreaterThan(r.encodeQ4);
      expect(r.encodeQ4).toBeGreaterThan(r.weightBytes);
    }
    // Whisper-large-v3's 32 layers and Voxtral's projector in f16: 32 × (4 × 1280² + 2 × 1280 × 5120) + 5120 × 3072 + 3072² values of 2 bytes.
    const linears = 2 * (32 * (4 * 1280 * 1280 + 2 * 1280 * 5120) + 5120 * 3072 + 3072 * 3072);
    const tower = vox[0].encodeF16 - vox[0].weightBytes;
    expect(tower).toBeGreaterThan(linears);
    expect(tower).toBeLessThan(linears + ENCODER_BATCH_BYTES + 40e6);
    expect(memoryMarkdown(rows, 'q4', 'f16')).toContain('peak encoding: f16 / q4 audio tower');
  });
});
