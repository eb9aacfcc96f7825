import { describe, expect, it } from 'vitest';
import { memoryNeed } from '../../src/backend/webgpu/fit.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { referenceConfig } from '../../src/model/testing.js';
import { clipFit } from '../../src/model/fit-check.js';
import { summarizeModel, type ModelSizing } from '../../src/model/inspect.js';
import { ModelLoadError } from '../../src/errors.js';
import { loadModel } from '../../src/model/loader.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../helpers/temp.js';

const MiB = 2 ** 20;
const summary = (over: Partial<ModelSizing> = {}): ModelSizing => {
  const config = referenceConfig();
  return {
    config,
    weightFormat: 'f32',
    weightBytes: decoderWeightBytes(config, 'f32').total,
    tied: false,
    ...over,
  };
};

describe("the model panel's fit verdict", () => {
  it("is the loader's plan for the clip's audio tokens: weights + buffers + the run's KV pool, per phase", () => {
    const s = summary();
    const v = clipFit(s, { seconds: 60, kvPrecision: 'f16', budget: 1 }, { limits: null, deviceMemoryGiB: 4 });
    const plan = memoryNeed(s.config, {
      weightFormat: 'f32',
      tied: false,
      audioTokens: Math.ceil(60 * s.config.audio.tokensPerSecond),
      kvPrecision: 'f16',
      budget: 1,
    });
    expect(v.plan).toEqual(plan);
    expect(v.fits).toBe(true);
    expect(v.text).toMatch(
      /^Needs .* of f32 weights \+ .* while prefilling \(buffers and the KV pool so far\) or .* while decoding \(the KV pool \(full cache\) with 240 tokens of text\) = .* at the peak; fits the 4 GiB/,
    );
    // WnW at 0.2 plans a smaller pool for a long clip.
    const wnw = clipFit(s, { seconds: 1800, kvPrecision: 'f16', budget: 0.2 }, { limits: null });
    const full = clipFit(s, { seconds: 1800, kvPrecision: 'f16', budget: 1 }, { limits: null });
    expect(wnw.plan!.poolBytes).toBeLessThan(full.plan!.poolBytes / 2);
    expect(wnw.text).toMatch(/KV pool \(r_GPU 0\.2\)/);
  });

  it('says which adapter limit fails and what to do', () => {
    const s = summary();
    // A reference-model layer matrix is well under 1 MiB in f32; a 64 KiB binding holds none of the large ones.
    const v = clipFit(
      s,
      { seconds: 10, kvPrecision: 'f32', budget: 1 },
      { limits: { maxStorageBufferBindingSize: 64 * 1024, maxBufferSize: 256 * MiB } },
    );
    expect(v.fits).toBe(false);
    expect(v.problems[0].limit).toBe('maxStorageBufferBindingSize');
    expect(v.text).toMatch(
      /does not fit\. layers\.\*\.\w+ \(f32, \d+ × \d+\) needs .* over this device's maxStorageBufferBindingSize/,
    );
    // The CPU backend binds nothing: the same model is judged on memory alone.
    expect(clipFit(s, { seconds: 10, kvPrecision: 'f32', budget: 1 }, { limits: null }).fits).toBeNull();
  });
});

describe('the model panel summary', () => {
  it('states the format the loader stores the decoder in, on our own layout too', async () => {
    const seen: string[] = [];
    const model = await loadModel('public/models/wnw-ref', undefined, {
      weightFormat: 'q4',
      beforeWeights: (_c, f) => void seen.push(f),
    });
    for (const f of ['f32', 'f16', 'q4'] as const) {
      const s = await summarizeModel('public/models/wnw-ref', f);
      expect(s.family).toBe('wnw (own layout)');
      expect(s.weightFormat).toBe(f);
      expect(s.weightBytes).toBe(decoderWeightBytes(model.config, f).total);
    }
    expect(seen).toEqual(['q4']);
  });

  it("refuses a config that is neither layout with the loader's error", async () => {
    const dir = tempDir('wnw-fit-');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ vocab: 3 }));
    await expect(summarizeModel(dir)).rejects.toThrow(ModelLoadError);
    await expect(summarizeModel(dir)).rejects.toThrow(/neither a wnw model config .* nor a Hugging Face config/);
    await expect(loadModel(dir)).rejects.toThrow(/neither a wnw model config .* nor a Hugging Face config/);
  });
});

describe("the verdict's encode phase", () => {
  it('counts a Hugging Face audio tower beside the WebGPU decoder, in the format the route would choose', async () => {
    const { ensureMiniatures } = await import('../helpers/miniatures.js');
    const s = await summarizeModel(join(await ensureMiniatures(), 'qwen2_5_omni'), 'q4');
    expect(s.audioTower).toBeDefined();
    const limits = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 30 };
    const v = clipFit(s, { seconds: 10, kvPrecision: 'f16', budget: 1 }, { limits });
    const f16 = s.audioTower!('f16');
    expect(v.plan!.phases.encode).toBe(s.weightBytes + f16.weightBytes + f16.batchBytes);
    expect(v.text).toMatch(/while encoding \(the f16 audio tower\)/);
    // Memory that cannot hold the f16 tower beside the decoder: the q4 tower, as the route would take.
    const q4 = s.audioTower!('q4');
    const tight = clipFit(
      s,
      { seconds: 10, kvPrecision: 'f16', budget: 1 },
      { limits, memoryBytes: s.weightBytes + q4.weightBytes + q4.batchBytes + 1 },
    );
    expect(tight.text).toMatch(/the q4 audio tower/);
    // The CPU backend runs the tower on the CPU: no encode phase on the GPU.
    expect(clipFit(s, { seconds: 10, kvPrecision: 'f16', budget: 1 }, { limits: null }).plan!.phases.encode).toBe(
      s.weightBytes,
    );
  }, 120_000);
});
