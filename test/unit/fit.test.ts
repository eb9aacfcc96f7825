import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkFit,
  minutesThatFit,
  memoryNeed,
  refuseUnfit,
  weightBindingProblems,
  type DeviceLimits,
  type MemoryNeedRequest,
} from '../../src/backend/webgpu/fit.js';
import { ContextTooLongError, ModelTooBigError } from '../../src/errors.js';
import { familyFor } from '../../src/model/families/registry.js';
import { hfModelConfig } from '../../src/model/hf/config.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { decoderShapeConfig } from '../../src/model/testing.js';
import { promptLength } from '../../src/model/config.js';
import { clipFit } from '../../src/model/fit-check.js';
import { summarizeModel } from '../../src/model/inspect.js';
import { tempDir } from '../helpers/temp.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

// Voxtral-Mini-3B's text config as the released config.json leaves it: the family fills the sizes.
const VOXTRAL_JSON = {
  model_type: 'voxtral',
  audio_token_id: 24,
  text_config: { model_type: 'llama' },
  audio_config: {},
};
const voxtral = hfModelConfig(familyFor('voxtral')!, VOXTRAL_JSON, 'config.json').config;
// WebGPU's default limits, which every adapter offers.
const DEFAULTS: DeviceLimits = { maxStorageBufferBindingSize: 128 * MiB, maxBufferSize: 256 * MiB };
const BIG: DeviceLimits = { maxStorageBufferBindingSize: 4 * GiB, maxBufferSize: 4 * GiB };
const minutes = (m: number, r: Partial<MemoryNeedRequest> = {}): MemoryNeedRequest => ({
  weightFormat: 'q4',
  tied: false,
  audioTokens: Math.ceil(60 * m * voxtral.audio.tokensPerSecond),
  kvPrecision: 'f16',
  budget: 0.2,
  ...r,
});

describe('will it fit: weight tensors against one binding', () => {
  it('names a layer matrix larger than one binding and suggests the formats that fit', () => {
    expect(voxtral.hiddenSize).toBe(3072);
    expect(voxtral.intermediateSize).toBe(8192);
    // f32 gate/up [16384, 3072] is 192 MiB; every other Voxtral layer matrix is at most 96 MiB.
    const f32 = weightBindingProblems(voxtral, 'f32', DEFAULTS);
    expect(f32.map((p) => p.what)).toEqual(['layers.*.gate_up (f32, 16384 × 3072)']);
    expect(f32[0]).toMatchObject({
      limit: 'maxStorageBufferBindingSize',
      bytes: 16384 * 3072 * 4,
      limitBytes: 128 * MiB,
    });
    expect(f32[0].advice).toMatch(/as f16 or q4 \(npx wnw convert HF_DIR OUT_DIR --quant q4/);
    expect(weightBindingProblems(voxtral, 'f16', DEFAULTS)).toEqual([]);
    expect(weightBindingProblems(voxtral, 'q4', DEFAULTS)).toEqual([]);
    // The 131,072-row embedding and lm_head are split by rows: never a problem.
    expect(weightBindingProblems(voxtral, 'f32', BIG)).toEqual([]);
  });

  it('names maxBufferSize when it is the smaller limit, and suggests q4 alone when f16 does not fit either', () => {
    const p = weightBindingProblems(voxtral, 'f32', { maxStorageBufferBindingSize: 1 * GiB, maxBufferSize: 64 * MiB });
    // f32 QKV [6144, 3072] 72 MiB, gate/up 192 MiB, down [3072, 8192] 96 MiB; o_proj [3072, 4096] is 48 MiB.
    expect(p.map((x) => x.what.split(' ')[0])).toEqual(['layers.*.qkv', 'layers.*.gate_up', 'layers.*.down_proj']);
    expect(p.every((x) => x.limit === 'maxBufferSize' && x.limitBytes === 64 * MiB)).toBe(true);
    expect(p[0].advice).toMatch(/as q4 \(/);
    expect(p[0].message).toMatch(/over this device's maxBufferSize \(64\.0 MiB\)/);
  });

  it('says when no format fits', () => {
    const p = weightBindingProblems(voxtral, 'q4', { maxStorageBufferBindingSize: 8 * MiB, maxBufferSize: 8 * MiB });
    expect(p.length).toBeGreaterThan(0);
    expect(p[0].advice).toMatch(/no weight format makes it fit/);
  });
});

describe('will it fit: weights + the KV plan for the recording', () => {
  it("is the memory bench's plan: the larger of the prefill and decoding, each with the pool as it stands then", () => {
    const p = memoryNeed(voxtral, minutes(30));
    expect(p.weightBytes).toBe(decoderWeightBytes(voxtral, 'q4').total);
    expect(p.peakBytes).toBe(Math.max(p.phases.prefill, p.phases.decode));
    // Prefill: its buffers beside the pool without generated text, and one layer's K/V staged for CPU copies, f16 as the prefill holds them.
    const staged = 2 * 2 * promptLength(voxtral, p.audioTokens) * voxtral.numKvHeads * voxtral.headDim;
    expect(p.phases.prefill).toBe(p.weightBytes + p.decodeBytes + p.prefillBytes + p.prefillPoolBytes + staged);
    // Decoding: the pool grown for 4 tokens a second (7,200 at 30 min), one layer's share of it copied once more.
    expect(p.textTokens).toBe(7200);
    const copy = p.phases.decode - (p.weightBytes + p.decodeBytes + p.poolBytes);
    expect(copy).toBeGreaterThan(0);
    expect(copy).toBeLessThan(p.poolBytes / voxtral.numLayers);
    // Text KV is on demand: no generated text, no text pages beyond the prompt's; a faster transcript, more.
    const silent = memoryNeed(voxtral, minutes(30, { textPerSecond: 0 }));
    expect(silent.poolBytes).toBe(silent.prefillPoolBytes);
    expect(memoryNeed(voxtral, minutes(30, { textPerSecond: 6 })).poolBytes).toBeGreaterThan(p.poolBytes);
    expect(p.poolBytes).toBeLessThan(p.poolFull / 2);
    const full = memoryNeed(voxtral, minutes(30, { budget: 1 }));
    expect(full.poolBytes).toBe(full.poolFull);
    expect(full.poolFull).toBe(p.poolFull);
    // f16 KV halves the pool's keys and values (not its positions and tables).
    expect(
      memoryNeed(voxtral, minutes(30, { kvPrecision: 'f32', budget: 1 })).poolBytes / full.poolBytes,
    ).toBeGreaterThan(1.75);
  });

  it('fits where every buffer binds and the reported memory holds the peak', () => {
    const v = checkFit(voxtral, minutes(10), { limits: BIG, deviceMemoryGiB: 8 });
    expect(v.fits).toBe(true);
    expect(v.problems).toEqual([]);
    expect(v.text).toMatch(
      /q4 weights .* KV pool \(r_GPU 0\.2\) with 2,400 tokens of text\) = .* GiB at the peak; fits the 8 GiB/,
    );
  });

  it('a layer matrix over the binding fails with the fix, whatever the memory', () => {
    const v = checkFit(voxtral, minutes(10, { weightFormat: 'f32' }), { limits: DEFAULTS, deviceMemoryGiB: 8 });
    expect(v.fits).toBe(false);
    expect(v.problems[0].what).toMatch(/^layers\.\*\.gate_up/);
    expect(v.text).toMatch(
      /does not fit\. layers\.\*\.gate_up .* over this device's maxStorageBufferBindingSize \(128\.0 MiB\): store the decoder weights as f16 or q4/,
    );
    // No recording binds then, so no length is offered.
    expect(v.wouldFit).toBeUndefined();
  });

  it('a recording whose prompt buffers pass one binding fails, saying to shorten it', () => {
    // 16 hours of Voxtral audio: the prompt's hidden states alone are 2.6 GiB.
    const v = checkFit(voxtral, minutes(960), { limits: DEFAULTS });
    expect(v.fits).toBe(false);
    expect(v.plan).toBeNull();
    expect(v.problems[0].limit).toBe('maxStorageBufferBindingSize');
    expect(v.problems[0].message).toMatch(
      /prompt hidden states.*over this device's binding limit.*shorter clip.* The limit is this device's maxStorageBufferBindingSize\.$/,
    );
    // Without WebGPU (the CPU backend) there is no binding to pass: the plan itself cannot be made past 2 GiB.
    expect(() => memoryNeed(voxtral, minutes(960))).toThrow(ContextTooLongError);
    // The minutes offered are the longest whose buffers bind.
    const m = v.wouldFit!.minutes;
    expect(() => memoryNeed(voxtral, minutes(m), DEFAULTS)).not.toThrow();
    expect(() => memoryNeed(voxtral, minutes(m + 1), DEFAULTS)).toThrow(ContextTooLongError);
    expect(v.text).toMatch(
      new RegExp(
        `At r_GPU 0\\.2 with f16 KV and q4 weights, about ${m} minutes of audio fit within this device's bindings\\.$`,
      ),
    );
  });

  it("one layer's pool pages past a binding fail, saying a lower budget or f16 helps", () => {
    // Multi-head miniature (KV width = hidden) at a 2 MiB binding: the prompt's buffers bind
    // (8,012 rows of 256 bytes), the full cache's keys of one layer (audio + 2,000 text slots) do not, WnW's do.
    const c = decoderShapeConfig('qwen2_audio');
    const limits = { maxStorageBufferBindingSize: 2 * MiB, maxBufferSize: 2 * MiB };
    const r: MemoryNeedRequest = {
      weightFormat: 'f32',
      tied: false,
      audioTokens: 8000,
      kvPrecision: 'f32',
      budget: 1,
      maxNewTokens: 2000,
    };
    const full = checkFit(c, r, { limits });
    expect(full.fits).toBe(false);
    expect(full.problems[0].what).toBe("one layer's KV pool pages");
    expect(full.problems[0].message).toMatch(/lower GPU budget/);
    expect(checkFit(c, { ...r, budget: 0.2 }, { limits }).problems).toEqual([]);
  });

  it('judges the total against navigator.deviceMemory, and leaves it open where that cannot tell', () => {
    const r = minutes(60, { weightFormat: 'f16', budget: 1 });
    const peak = memoryNeed(voxtral, r).peakBytes;
    // Twice the 4 GiB report below: a peak the device surely lacks.
    expect(peak).toBeGreaterThan(2 * 4 * GiB);
    // Reports are rounded down: 4 GiB means less than 8 GiB, far below the peak.
    const small = checkFit(voxtral, r, { limits: BIG, deviceMemoryGiB: 4 });
    expect(small.fits).toBe(false);
    expect(small.problems.map((p) => p.limit)).toEqual(['deviceMemory']);
    expect(small.text).toMatch(/--quant q4/);
    // At the cap (8) the device may have any amount more; no report at all: unknown.
    expect(checkFit(voxtral, r, { limits: BIG, deviceMemoryGiB: 8 }).fits).toBeNull();
    const silent = checkFit(voxtral, r, { limits: BIG });
    expect(silent.fits).toBeNull();
    expect(silent.text).toMatch(/does not say how much memory/);
    // The CPU backend (no adapter): only the memory is judged.
    expect(checkFit(voxtral, minutes(1), { limits: null, deviceMemoryGiB: 8 }).fits).toBe(true);
  });
});

describe('a recording too long for the device names the minutes that fit', () => {
  const GB4 = { limits: BIG, memoryBytes: 4 * GiB };
  const full40 = minutes(40, { budget: 1 });

  it('a 40-minute full-cache Voxtral-Mini-3B run on 4 GiB: refused, with the longest run the same sizing fits', () => {
    const v = checkFit(voxtral, full40, GB4);
    expect(v.fits).toBe(false);
    expect(v.problems.map((p) => p.limit)).toEqual(['deviceMemory']);
    const m = v.wouldFit!.minutes;
    expect(m).toBe(minutesThatFit(voxtral, full40, GB4));
    expect(m).toBeGreaterThan(0);
    expect(memoryNeed(voxtral, minutes(m, { budget: 1 })).peakBytes).toBeLessThanOrEqual(4 * GiB);
    expect(memoryNeed(voxtral, minutes(m + 1, { budget: 1 })).peakBytes).toBeGreaterThan(4 * GiB);
    expect(v.text).toContain(
      `At the full cache with f16 KV and q4 weights, about ${m} minutes of audio fit in 4.00 GiB.`,
    );
    // WnW at 0.2 keeps a fifth of the audio KV: more minutes fit the same memory.
    expect(minutesThatFit(voxtral, minutes(40), GB4)).toBeGreaterThan(m);
    // Within the limit it fits, and says so exactly.
    expect(checkFit(voxtral, minutes(m, { budget: 1 }), GB4)).toMatchObject({ fits: true, problems: [] });
  });

  it("is refused from config.json alone, before any weight is read: the demo's verdict and ModelTooBigError", async () => {
    // The folder holds no weights at all: a check that read one would fail on the missing file instead.
    const dir = tempDir('wnw-fit-minutes-');
    writeFileSync(join(dir, 'config.json'), JSON.stringify(VOXTRAL_JSON));
    const s = await summarizeModel(dir, 'q4');
    const m = minutesThatFit(s.config, full40, GB4);
    const demo = clipFit(s, { seconds: 40 * 60, kvPrecision: 'f16', budget: 1 }, GB4);
    expect(demo.fits).toBe(false);
    expect(demo.wouldFit?.minutes).toBe(m);
    let err: unknown;
    try {
      refuseUnfit(s.config, s.weightFormat, s.tied, GB4, 'the decoder of Voxtral-Mini-3B', {
        audioTokens: full40.audioTokens,
        kvPrecision: 'f16',
        budget: 1,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelTooBigError);
    expect((err as ModelTooBigError).code).toBe('MODEL_TOO_BIG');
    expect((err as ModelTooBigError).minutesThatFit).toBe(m);
    expect((err as Error).message).toMatch(
      new RegExp(
        `^the decoder of Voxtral-Mini-3B: weights, buffers and KV pool together needs .* over the memory this device has \\(4096\\.0 MiB\\): convert .* about ${m} minutes of audio fit in 4\\.00 GiB\\.$`,
      ),
    );
    // The recording that fits is let through.
    expect(() =>
      refuseUnfit(s.config, s.weightFormat, s.tied, GB4, 'x', {
        audioTokens: minutes(m).audioTokens,
        kvPrecision: 'f16',
        budget: 1,
      }),
    ).not.toThrow();
  });
});

describe('loading refuses weights no binding holds, before any GPU work', () => {
  it('WebGpuBackend.create throws ModelTooBigError naming the tensor and the limit, and makes no buffer', async () => {
    const { WebGpuBackend } = await import('../../src/backend/webgpu/backend.js');
    const { randomDecoderWeights } = await import('../../src/model/testing.js');
    const { ModelTooBigError } = await import('../../src/errors.js');
    const c = decoderShapeConfig('voxtral');
    const made: string[] = [];
    // A device whose bindings hold 64 KiB: the miniature's f32 QKV [256, 96] and down [96, 256] are 96 KiB,
    // gate/up [512, 96] 192 KiB (96 KiB in f16, 27 KiB in q4); o_proj [96, 128] 48 KiB.
    const device = {
      createBuffer: (d: { label: string }) => void made.push(d.label),
      createShaderModule: () => void made.push('shader'),
      destroy: () => {},
    };
    const context = {
      device,
      info: { label: 'test adapter', software: false },
      limits: { maxStorageBufferBindingSize: 64 * 1024, maxBufferSize: 1 * MiB },
    };
    const err = await WebGpuBackend.create(c, randomDecoderWeights(c), {
      context: context as never,
      weightFormat: 'f32',
    }).catch((e) => e);
    expect(err).toBeInstanceOf(ModelTooBigError);
    expect(err.code).toBe('MODEL_TOO_BIG');
    expect(err.problems.map((p: { what: string }) => p.what)).toEqual([
      'layers.*.qkv (f32, 256 × 96)',
      'layers.*.gate_up (f32, 512 × 96)',
      'layers.*.down_proj (f32, 96 × 256)',
    ]);
    expect(err.message).toMatch(
      /^the decoder of voxtral-shaped on test adapter: layers\.\*\.qkv .* over this device's maxStorageBufferBindingSize \(0\.1 MiB\): store the decoder weights as q4 \(/,
    );
    expect(made).toEqual([]);
  });
});
