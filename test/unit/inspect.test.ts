import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkFit,
  inspectModel,
  memoryNeed,
  openLocalFolder,
  releaseLocalFolder,
  PositionsExceededError,
  WnwError,
  type DeviceLimits,
} from '../../src/index.js';
import { minutesThatFit } from '../../src/backend/webgpu/fit.js';
import { promptLength } from '../../src/model/config.js';
import { loadModel } from '../../src/model/loader.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { miniature } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const REF = 'public/models/wnw-ref';
// WebGPU's default limits, which every adapter offers, and a large adapter's.
const DEFAULTS: DeviceLimits = { maxStorageBufferBindingSize: 128 * MiB, maxBufferSize: 256 * MiB };
const BIG: DeviceLimits = { maxStorageBufferBindingSize: 4 * GiB, maxBufferSize: 4 * GiB };

/** A directory handle over a folder on disk, as showDirectoryPicker() gives one in a page. */
function directoryHandle(dir: string, name = dir.split('/').pop()!): FileSystemDirectoryHandle {
  const handle = {
    kind: 'directory' as const,
    name,
    async *values() {
      for (const n of readdirSync(dir)) {
        const p = join(dir, n);
        if (statSync(p).isDirectory()) yield directoryHandle(p, n);
        else yield { kind: 'file' as const, name: n, getFile: async () => new File([readFileSync(p)], n) };
      }
    },
  };
  return handle as unknown as FileSystemDirectoryHandle;
}

describe('inspectModel', () => {
  it("reads the reference model's facts from its config, as the loader reads it, before any weight", async () => {
    const s = await inspectModel(REF);
    let loaded: { format: string; tied: boolean } | undefined;
    const model = await loadModel(REF, undefined, {
      beforeWeights: (_c, format, tied) => void (loaded = { format, tied }),
    });
    const c = model.config;
    expect(s).toMatchObject({
      model: REF,
      name: 'wnw-ref',
      family: 'wnw (own layout)',
      layout: 'own',
      modelType: 'wnw',
      layers: 4,
      hiddenSize: 192,
      heads: 16,
      kvHeads: 8,
      headDim: 32,
      maxPositions: 16384,
      audioTokensPerSecond: 12.5,
      headsJson: true,
      audioEncoder: { kind: 'onnx', file: 'encoder.onnx' },
      weightFormat: loaded!.format,
      tied: loaded!.tied,
      weightFormats: ['f32', 'f16', 'q4'],
    });
    expect(s.config).toEqual(c);
    expect(s.maxAudioSeconds).toBeCloseTo((16384 - promptLength(c, 0)) / 12.5, 9);
    expect(Math.ceil(s.maxAudioSeconds * 12.5)).toBe(16384 - promptLength(c, 0));
    for (const f of ['f32', 'f16', 'q4'] as const)
      expect(s.weightBytesByFormat[f]).toBe(decoderWeightBytes(c, f).total);
    expect(s.weightBytes).toBe(s.weightBytesByFormat.f32);
    expect(s.converted).toBeUndefined();
  });

  it('reads a picked folder (a directory handle) as the same folder, and gives the address to load it by', async () => {
    const byPath = await inspectModel(REF);
    const s = await inspectModel(directoryHandle(REF));
    expect(s.model).toMatch(/^wnw-files:\/\/\d+\/$/);
    expect(s.name).toBe('wnw-ref');
    const { model: _a, ...rest } = s;
    const { model: _b, ...restByPath } = byPath;
    expect(rest).toEqual(restByPath);
    // The address is what a load takes.
    expect((await loadModel(s.model)).config).toEqual(s.config);
    releaseLocalFolder(s.model);
    await expect(inspectModel(s.model)).rejects.toMatchObject({ code: 'MODEL_LOAD' });
    // The Files of a directory input register the same way.
    const files = readdirSync(REF)
      .filter((n) => !statSync(join(REF, n)).isDirectory())
      .map((n) => Object.assign(new File([readFileSync(join(REF, n))], n), { webkitRelativePath: `wnw-ref/${n}` }));
    const picked = await openLocalFolder(files);
    expect(picked).toMatchObject({ name: 'wnw-ref', files: files.length });
    expect(picked.bytes).toBe(files.reduce((a, f) => a + f.size, 0));
    expect((await inspectModel(picked.model)).layers).toBe(4);
    releaseLocalFolder(picked.model);
    await expect(openLocalFolder({} as unknown as FileSystemDirectoryHandle)).rejects.toMatchObject({
      code: 'BAD_ARGUMENT',
    });
  });

  it('reads a Voxtral-shaped miniature: its family, its audio tower in each format, no heads.json', async () => {
    const dir = await miniature('voxtral');
    const s = await inspectModel(dir);
    let loaded: { format: string; tied: boolean; layers: number; kvHeads: number } | undefined;
    await loadModel(dir, undefined, {
      beforeWeights: (c, format, tied) => {
        loaded = { format, tied, layers: c.numLayers, kvHeads: c.numKvHeads };
        throw new Error('stop before the weights');
      },
    }).catch(() => {});
    expect(s).toMatchObject({
      name: 'voxtral',
      family: 'voxtral (Hugging Face)',
      layout: 'hf',
      modelType: 'voxtral',
      headsJson: false,
      layers: loaded!.layers,
      kvHeads: loaded!.kvHeads,
      weightFormat: loaded!.format,
      tied: loaded!.tied,
    });
    expect(s.audioEncoder.kind).toBe('audio-tower');
    const bytes = s.audioEncoder.kind === 'audio-tower' ? s.audioEncoder.bytes! : undefined;
    for (const f of ['f32', 'f16', 'q4'] as const) expect(bytes![f]).toEqual(s.audioTower!(f));
    expect(bytes!.q4.weightBytes).toBeLessThan(bytes!.f16.weightBytes);
    expect(s.maxAudioSeconds).toBeCloseTo((s.maxPositions - promptLength(s.config, 0)) / s.audioTokensPerSecond, 9);
  });
});

describe('checkFit on a summary', () => {
  it('is the loader’s plan for the recording on the reference model: fits, with the bytes per phase', async () => {
    const s = await inspectModel(REF);
    const v = checkFit(s, {
      minutes: 10,
      policy: 'full',
      kv: 'f16',
      device: { limits: DEFAULTS, memoryBytes: 4 * GiB },
    });
    expect(v.fits).toBe(true);
    expect(v.problems).toEqual([]);
    expect(v.plan).toEqual(
      memoryNeed(s.config, {
        weightFormat: 'f32',
        tied: false,
        audioTokens: Math.ceil(600 * 12.5),
        kvPrecision: 'f16',
        budget: 1,
      }),
    );
    expect(v.text).toMatch(/^Needs .* of f32 weights .* fits the 4\.00 GiB limit\.$/);
    // seconds and minutes are one length; WnW's budget plans a smaller pool; q4 weights are smaller.
    expect(checkFit(s, { seconds: 600, policy: 'full', kv: 'f16', device: { limits: DEFAULTS } }).plan).toEqual(v.plan);
    const wnw = checkFit(s, { minutes: 10, policy: 'wnw', budget: 0.2, kv: 'f16', device: { limits: DEFAULTS } });
    expect(wnw.plan!.poolBytes).toBeLessThan(v.plan!.poolBytes);
    expect(wnw.text).toMatch(/KV pool \(r_GPU 0\.2\)/);
    const q4 = checkFit(s, { minutes: 10, kv: 'f16', weightFormat: 'q4', device: { limits: DEFAULTS } });
    expect(q4.plan!.weightBytes).toBe(s.weightBytesByFormat.q4);
    // Without a device: memory alone, as this process reports it (Node reports none: the verdict is open).
    expect(checkFit(s, { minutes: 1 }).fits).toBeNull();
  });

  it("counts a Voxtral miniature's audio tower while encoding on WebGPU", async () => {
    const s = await inspectModel(await miniature('voxtral'));
    const v = checkFit(s, { seconds: 30, policy: 'full', kv: 'f16', device: { limits: BIG, memoryBytes: 4 * GiB } });
    expect(v.fits).toBe(true);
    // An f32 decoder runs an f32 tower.
    const tower = s.audioTower!('f32');
    expect(v.plan!.phases.encode).toBe(s.weightBytes + tower.weightBytes + tower.batchBytes);
    expect(v.text).toMatch(/while encoding \(the f32 audio tower\)/);
  });

  it('refuses a folder that does not fit with a typed verdict: the limit, the bytes needed and had, the minutes that fit', async () => {
    // Voxtral-Mini-3B's config with no weights beside it: the check reads config.json alone.
    const dir = tempDir('wnw-inspect-');
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({
        model_type: 'voxtral',
        audio_token_id: 24,
        text_config: { model_type: 'llama' },
        audio_config: {},
      }),
    );
    const s = await inspectModel(dir);
    expect(s).toMatchObject({ layers: 30, hiddenSize: 3072, kvHeads: 8, headsJson: false });
    // audio_config states no tower shape: the verdict judges the decoder alone (the load would refuse the folder).
    expect(s.audioEncoder).toEqual({ kind: 'audio-tower' });
    expect(s.audioTower).toBeUndefined();
    expect(s.weightBytesByFormat.q4).toBeLessThan(s.weightBytesByFormat.f16!);
    const device = { limits: BIG, memoryBytes: 4 * GiB };
    const v = checkFit(s, { minutes: 40, policy: 'full', kv: 'f16', weightFormat: 'q4', device });
    expect(v.fits).toBe(false);
    expect(v.problems).toHaveLength(1);
    const p = v.problems[0];
    expect(p).toMatchObject({ limit: 'deviceMemory', limitBytes: 4 * GiB });
    expect(p.bytes).toBe(v.plan!.peakBytes);
    expect(p.bytes).toBeGreaterThan(4 * GiB);
    const m = minutesThatFit(
      s.config,
      { weightFormat: 'q4', tied: s.tied, audioTokens: 0, kvPrecision: 'f16', budget: 1 },
      device,
    );
    expect(v.wouldFit?.minutes).toBe(m);
    expect(m).toBeGreaterThan(0);
    expect(m).toBeLessThan(40);
    expect(checkFit(s, { minutes: m, policy: 'full', kv: 'f16', weightFormat: 'q4', device }).fits).toBe(true);
    // f32 weights: a layer matrix past WebGPU's default binding, at any length.
    const f32 = checkFit(s, { minutes: 1, kv: 'f16', device: { limits: DEFAULTS } });
    expect(f32.fits).toBe(false);
    expect(f32.problems[0]).toMatchObject({ limit: 'maxStorageBufferBindingSize', bytes: 16384 * 3072 * 4 });
    expect(f32.wouldFit).toBeUndefined();
  });

  it('refuses a bad request with a typed error, and a recording past the positions as a load would', async () => {
    const s = await inspectModel(REF);
    const bad = (o: Parameters<typeof checkFit>[1]) => {
      try {
        checkFit(s, o);
      } catch (e) {
        return e;
      }
      return undefined;
    };
    for (const o of [
      {},
      { seconds: 60, minutes: 1 },
      { seconds: -1 },
      { minutes: Number.NaN },
      { seconds: 60, budget: 2 },
    ])
      expect(bad(o as Parameters<typeof checkFit>[1])).toMatchObject({ code: 'BAD_ARGUMENT' });
    expect(bad({ seconds: 60, weightFormat: 'bf16' as never })).toBeInstanceOf(WnwError);
    const past = bad({ seconds: s.maxAudioSeconds + 10 });
    expect(past).toBeInstanceOf(PositionsExceededError);
    expect(past).toMatchObject({ code: 'CONTEXT_TOO_LONG', maxPositions: 16384 });
    expect((past as Error).message).toMatch(/^wnw-ref: a .* min recording .* At most .* min of audio fit/);
    expect(checkFit(s, { seconds: s.maxAudioSeconds }).plan).not.toBeNull();
  });
});
