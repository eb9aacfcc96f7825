/**
 * The CPU backend's host-memory fit check: what it counts (the weights as held, the load's
 * transient f32 tensor, every position's K/V, the prefill), where "available" comes from,
 * and a load refused with MODEL_TOO_BIG, naming the bytes needed and available, before any
 * weight byte is read (the folder below holds no weights at all: a check that came after
 * reading one would fail on the missing shard instead).
 */
import { copyFileSync, readdirSync, writeFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostMemoryNeed, refuseHostUnfit } from '../../src/backend/webgpu/fit.js';
import { availableHostMemory, cgroupLimit, HOST_MEMORY_ENV } from '../../src/backend/cpu/host-memory.js';
import { familyFor } from '../../src/model/families/registry.js';
import { hfModelConfig } from '../../src/model/hf/config.js';
import { decoderWeightBytes } from '../../src/model/packed-weights.js';
import { kvHeadCount } from '../../src/model/config.js';
import { ModelLoadError, ModelTooBigError, WnwError } from '../../src/errors.js';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { ensureMiniatures } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

// Voxtral-Mini-3B-2507's published sizes (the family's defaults fill a bare config).
const VOXTRAL_JSON = {
  model_type: 'voxtral',
  audio_token_id: 24,
  text_config: { model_type: 'llama' },
  audio_config: {},
};
const voxtral = hfModelConfig(familyFor('voxtral')!, VOXTRAL_JSON, 'config.json').config;
const GiB = 2 ** 30;

describe('host memory the CPU backend needs', () => {
  it('is the weights as held, and at load the f32 tensor being packed beside them', () => {
    expect(voxtral.hiddenSize).toBe(3072);
    for (const weightFormat of ['f32', 'f16', 'q4'] as const) {
      const n = hostMemoryNeed(voxtral, { weightFormat, tied: false });
      expect(n.weightBytes).toBe(decoderWeightBytes(voxtral, weightFormat).total);
      expect(n.peakBytes).toBe(n.weightBytes);
    }
    // Packing an upstream folder at load widens one tensor at a time, the largest the 131,072 x 3,072 embedding.
    const packing = hostMemoryNeed(voxtral, { weightFormat: 'q4', tied: false, packAtLoad: true });
    expect(packing.loadBytes).toBe(131072 * 3072 * 4);
    expect(packing.peakBytes).toBe(packing.weightBytes + packing.loadBytes);
    // q4 Voxtral: about 2.1 GiB held, against 15 GiB as f32.
    expect(packing.weightBytes / GiB).toBeGreaterThan(2);
    expect(packing.weightBytes / GiB).toBeLessThan(2.3);
  });

  it("counts every position's K/V (pool and WnW's offload store are both host memory), half of it in f16", () => {
    const rec = (seconds: number, kvPrecision: 'f32' | 'f16') => ({
      weightFormat: 'q4' as const,
      tied: false,
      recording: { audioTokens: Math.ceil(seconds * voxtral.audio.tokensPerSecond), kvPrecision },
    });
    const tenMin = hostMemoryNeed(voxtral, rec(600, 'f16'));
    // 240 KV heads x 128 x (K + V) x 2 bytes = 122,880 bytes a position; 7,500 audio tokens
    // and 4 text tokens a second of audio, page-rounded per head.
    const perPosition = kvHeadCount(voxtral) * 128 * 2 * 2;
    expect(perPosition).toBe(122880);
    expect(tenMin.kvBytes).toBeGreaterThanOrEqual(perPosition * (7500 + 2400));
    expect(tenMin.kvBytes).toBeLessThan(perPosition * (7500 + 2400 + 200));
    expect(hostMemoryNeed(voxtral, rec(600, 'f32')).kvBytes).toBe(2 * tenMin.kvBytes);
    expect(tenMin.peakBytes).toBeGreaterThanOrEqual(tenMin.weightBytes + tenMin.kvBytes);
    // The prefill's activations count while it runs.
    expect(tenMin.prefillBytes).toBeGreaterThan(0);
  });

  it('refuses with MODEL_TOO_BIG naming the bytes needed, the bytes available and where that figure comes from', () => {
    const r = { weightFormat: 'q4' as const, tied: false };
    const need = hostMemoryNeed(voxtral, r).peakBytes;
    expect(() => refuseHostUnfit(voxtral, r, { bytes: need, source: 'x' }, 'here')).not.toThrow();
    let err: unknown;
    try {
      refuseHostUnfit(voxtral, r, { bytes: need - 1, source: 'the test' }, 'the decoder of Voxtral');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ModelTooBigError);
    expect((err as ModelTooBigError).code).toBe('MODEL_TOO_BIG');
    expect((err as Error).message).toContain(
      `the decoder of Voxtral: the CPU backend (host memory) needs ${need} bytes`,
    );
    expect((err as Error).message).toContain(`but ${need - 1} bytes`);
    expect((err as Error).message).toContain('available per the test');
  });
});

describe('host memory available', () => {
  afterEach(() => {
    delete process.env[HOST_MEMORY_ENV];
  });

  it('reads cgroup limit files: a number, or none for "max" and cgroup v1\'s unlimited 2^63', () => {
    expect(cgroupLimit('8589934592\n')).toBe(8589934592);
    expect(cgroupLimit('max\n')).toBeUndefined();
    expect(cgroupLimit('9223372036854771712')).toBeUndefined();
    expect(cgroupLimit('')).toBeUndefined();
  });

  it('takes the option first, then the environment variable, else what this machine has', async () => {
    expect(await availableHostMemory(12345)).toEqual({ bytes: 12345, source: 'the hostMemoryBytes option' });
    process.env[HOST_MEMORY_ENV] = '67890';
    expect(await availableHostMemory()).toEqual({ bytes: 67890, source: HOST_MEMORY_ENV });
    process.env[HOST_MEMORY_ENV] = '2GB';
    await expect(availableHostMemory()).rejects.toThrow(/WNW_HOST_MEMORY_BYTES must be a whole number of bytes/);
    delete process.env[HOST_MEMORY_ENV];
    const m = (await availableHostMemory())!;
    expect(m.bytes).toBeGreaterThan(0);
    expect(m.bytes).toBeLessThanOrEqual(totalmem());
  });
});

describe('loading on the CPU', () => {
  afterEach(() => {
    delete process.env[HOST_MEMORY_ENV];
  });

  /** A full-size Voxtral config with the miniature's tokenizer files, and no weights at all. */
  async function weightlessVoxtral(): Promise<string> {
    const mini = join(await ensureMiniatures(), 'voxtral');
    const dir = tempDir('wnw-host-fit-');
    for (const f of readdirSync(mini))
      if (!f.endsWith('.safetensors') && f !== 'model.safetensors.index.json' && f !== 'heads.json')
        copyFileSync(join(mini, f), join(dir, f));
    writeFileSync(join(dir, 'config.json'), JSON.stringify(VOXTRAL_JSON));
    return dir;
  }

  async function loadError(options: Parameters<typeof loadTranscriber>[0]): Promise<unknown> {
    try {
      (await loadTranscriber(options)).dispose();
    } catch (e) {
      return e;
    }
    return undefined;
  }

  it('a model over the host memory is MODEL_TOO_BIG before any weight byte is read; one within it goes on to read them', async () => {
    const dir = await weightlessVoxtral();
    const base = { model: dir, backend: 'cpu' as const, policy: 'full' as const, weightFormat: 'q4' as const };
    const need = hostMemoryNeed(voxtral, { weightFormat: 'q4', tied: false, packAtLoad: true }).peakBytes;
    const refused = await loadError({ ...base, hostMemoryBytes: 3 * GiB });
    expect(refused).toBeInstanceOf(ModelTooBigError);
    expect((refused as WnwError).message).toContain(`needs ${need} bytes`);
    expect((refused as WnwError).message).toContain(
      `but ${3 * GiB} bytes (3.00 GiB) are available per the hostMemoryBytes option`,
    );
    // The same through the environment variable.
    process.env[HOST_MEMORY_ENV] = String(3 * GiB);
    const viaEnv = await loadError(base);
    expect(viaEnv).toBeInstanceOf(ModelTooBigError);
    expect((viaEnv as WnwError).message).toContain(`available per ${HOST_MEMORY_ENV}`);
    // Enough memory: past the check, the load reads the weights, and this folder has none.
    const passed = await loadError({ ...base, hostMemoryBytes: need });
    expect(passed).toBeInstanceOf(ModelLoadError);
    expect((passed as Error).message).toMatch(/no safetensors weights/);
  }, 120_000);

  it("a recording known at load adds its K/V: the weights fit, a long recording's KV does not", async () => {
    const dir = await weightlessVoxtral();
    const need = hostMemoryNeed(voxtral, { weightFormat: 'q4', tied: false, packAtLoad: true }).peakBytes;
    const base = {
      model: dir,
      backend: 'cpu' as const,
      policy: 'full' as const,
      weightFormat: 'q4' as const,
      hostMemoryBytes: need,
    };
    expect(await loadError({ ...base, audioSeconds: 5 })).toBeInstanceOf(ModelLoadError);
    const long = await loadError({ ...base, audioSeconds: 20 * 60 });
    expect(long).toBeInstanceOf(ModelTooBigError);
    expect((long as Error).message).toMatch(/of f32 KV \(every position's/);
  }, 120_000);

  it('hostMemoryBytes must be a whole number of bytes', async () => {
    const e = await loadError({ model: '/nowhere', backend: 'cpu', hostMemoryBytes: 1.5 });
    expect(e).toBeInstanceOf(WnwError);
    expect((e as WnwError).code).toBe('BAD_ARGUMENT');
    expect((e as Error).message).toMatch(/hostMemoryBytes/);
  });
});
