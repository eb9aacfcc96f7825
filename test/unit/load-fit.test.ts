/**
 * The fit check runs on the config and the adapter's limits before any weight is read: the
 * folders here have no weight files at all, so a load that read one would fail with a
 * ModelLoadError naming it instead of the ModelTooBigError.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cpSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { defaultModelDir } from '../../src/cli/args.js';
import { ModelLoadError, ModelTooBigError } from '../../src/errors.js';
import type { LoadOptions } from '../../src/types.js';
import { miniature } from '../helpers/miniatures.js';
import { tempDir } from '../helpers/temp.js';

const KiB = 1024;

/** A WebGPU whose adapter binds `binding` bytes and whose device is never expected to be asked for. */
function smallGpu(binding: number) {
  const calls = { adapter: 0, device: 0 };
  const adapter = {
    limits: { maxStorageBufferBindingSize: binding, maxBufferSize: 4 * binding },
    features: new Set<string>(),
    info: { vendor: 'test', architecture: '', description: `${binding / KiB} KiB bindings` },
    requestDevice: async () => {
      calls.device++;
      throw new Error('this test makes no device');
    },
  };
  return { gpu: { requestAdapter: async () => (calls.adapter++, adapter) }, calls };
}

/** A copy of `from` without its weight files (safetensors shards; the index stays). */
function withoutWeights(from: string): string {
  const to = tempDir('wnw-load-fit-');
  for (const f of readdirSync(from))
    if (!f.endsWith('.safetensors')) cpSync(join(from, f), join(to, f), { recursive: true });
  return to;
}

const load = (o: LoadOptions) =>
  loadTranscriber({ policy: 'full', cache: false, ...o }).then(
    (t) => (t.dispose(), 'loaded'),
    (e: unknown) => e,
  );

describe('loadTranscriber judges the model against the device before reading a weight', () => {
  let voxtral: string;
  let own: string;
  beforeAll(async () => {
    voxtral = withoutWeights(await miniature('voxtral'));
    own = withoutWeights(defaultModelDir());
  }, 300_000);
  afterEach(() => vi.unstubAllGlobals());

  it('a Hugging Face folder in f32 on 64 KiB bindings: MODEL_TOO_BIG naming the tensors, no shard read, no device made', async () => {
    // The miniature's f32 QKV [768, 64] is 192 KiB, o_proj [64, 512] 128 KiB, gate/up [320, 64] 80 KiB; in f16 QKV is still 96 KiB, in q4 every one binds.
    const { gpu, calls } = smallGpu(64 * KiB);
    vi.stubGlobal('navigator', { gpu });
    for (const backend of ['webgpu', 'auto'] as const) {
      const err = await load({ model: voxtral, backend, weightFormat: 'f32' });
      expect(err).toBeInstanceOf(ModelTooBigError);
      expect((err as ModelTooBigError).code).toBe('MODEL_TOO_BIG');
      expect((err as ModelTooBigError).problems.map((p) => p.what)).toEqual([
        'layers.*.qkv (f32, 768 × 64)',
        'layers.*.o_proj (f32, 64 × 512)',
        'layers.*.gate_up (f32, 320 × 64)',
      ]);
      expect((err as Error).message).toMatch(
        /on WebGPU \(test 64 KiB bindings\): layers\.\*\.qkv .* over this device's maxStorageBufferBindingSize .*: store the decoder weights as q4 \(/,
      );
    }
    expect(calls).toEqual({ adapter: 2, device: 0 });
  }, 60_000);

  it('the same folder in q4 passes the check, and only then are the shards read', async () => {
    const { gpu, calls } = smallGpu(64 * KiB);
    vi.stubGlobal('navigator', { gpu });
    const err = await load({ model: voxtral, backend: 'webgpu', weightFormat: 'q4' });
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as Error).message).toMatch(/model-0000\d-of-00002\.safetensors/);
    expect(calls).toEqual({ adapter: 1, device: 0 });
  }, 60_000);

  it('a recording the device cannot hold (audioSeconds): refused before the shards are read, with the minutes that fit', async () => {
    const { gpu, calls } = smallGpu(4096 * KiB);
    vi.stubGlobal('navigator', { gpu });
    const err = await load({ model: voxtral, backend: 'webgpu', weightFormat: 'q4', audioSeconds: 3600 });
    expect(err).toBeInstanceOf(ModelTooBigError);
    const minutes = (err as ModelTooBigError).minutesThatFit!;
    expect(minutes).toBeGreaterThanOrEqual(1);
    expect(minutes).toBeLessThan(60);
    expect((err as Error).message).toMatch(new RegExp(`about ${minutes} minutes? of audio fit`));
    expect(calls).toEqual({ adapter: 1, device: 0 });
    // The minutes named pass the check (the load goes on to read the shards, which this folder lacks); one more does not.
    expect(
      await load({ model: voxtral, backend: 'webgpu', weightFormat: 'q4', audioSeconds: 60 * minutes }),
    ).toBeInstanceOf(ModelLoadError);
    expect(
      await load({ model: voxtral, backend: 'webgpu', weightFormat: 'q4', audioSeconds: 60 * (minutes + 1) }),
    ).toBeInstanceOf(ModelTooBigError);
  }, 60_000);

  it('our own folder: refused before decoder.safetensors is read', async () => {
    vi.stubGlobal('navigator', { gpu: smallGpu(64 * KiB).gpu });
    const err = await load({ model: own, backend: 'webgpu' });
    expect(err).toBeInstanceOf(ModelTooBigError);
    expect((err as Error).message).toMatch(/^the decoder of wnw-ref on WebGPU/);
  }, 60_000);

  it('the CPU backend asks for no adapter; memory the page reports below half the weights refuses it there too', async () => {
    const { gpu, calls } = smallGpu(64 * KiB);
    vi.stubGlobal('navigator', { gpu });
    // No binding limits on the CPU: the load goes on to the shards.
    expect(await load({ model: voxtral, backend: 'cpu', weightFormat: 'f32' })).toBeInstanceOf(ModelLoadError);
    expect(calls.adapter).toBe(0);
    // A page reporting 0.01 GiB (10.7 MB, so less than 21.5 MB) cannot hold 64 MiB of f32 embedding and lm_head.
    vi.stubGlobal('navigator', { gpu, deviceMemory: 0.01 });
    const err = await load({ model: voxtral, backend: 'cpu', weightFormat: 'f32' });
    expect(err).toBeInstanceOf(ModelTooBigError);
    expect((err as ModelTooBigError).problems.map((p) => p.limit)).toEqual(['deviceMemory']);
    expect((err as Error).message).toMatch(/the f32 decoder needs .* store the decoder weights as q4/);
    expect(calls.adapter).toBe(0);
  }, 60_000);
});
