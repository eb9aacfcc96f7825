/**
 * The ONNX route of a Hugging Face folder: the Voxtral miniature with its audio tower and
 * projector also exported as onnx-community's `onnx/audio_encoder.onnx` (audio_values
 * [chunks, 128, 3000] → audio_features). The loader reports the route as data, the route's
 * embeddings match the audio tower's on the same WAV, and graphs that do not fit are typed
 * MODEL_LOAD errors naming the file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAudioRoute } from '../../src/route/audio-route.js';
import { toMono16k } from '../../src/audio/decode.js';
import { ModelLoadError } from '../../src/errors.js';
import { loadModel } from '../../src/model/loader.js';
import { readHfOnnxEncoder } from '../../src/model/hf/onnx-audio.js';
import { miniature } from '../helpers/miniatures.js';
import { ensureOnnxEncoders, type OnnxVariant } from '../helpers/onnx-miniature.js';

let tmp = '';
let voxtral = '';
let onnxDir = '';
let samples: Float32Array = new Float32Array(0);
/** The audio tower's embeddings of the clip, and its model (loaded once: a load reads the whole decoder). */
let tower: Awaited<ReturnType<typeof embeddings>> | undefined;

/** A copy of the Voxtral miniature (links to its files) with `variant` as onnx/<name>, or without onnx/. */
function folder(tag: string, variant?: OnnxVariant, name = 'audio_encoder.onnx'): string {
  const dst = join(tmp, tag);
  mkdirSync(dst);
  for (const f of readdirSync(voxtral)) symlinkSync(join(voxtral, f), join(dst, f));
  if (variant) {
    mkdirSync(join(dst, 'onnx'));
    symlinkSync(join(onnxDir, `${variant}.onnx`), join(dst, 'onnx', name));
  }
  return dst;
}

async function embeddings(dir: string, audioEncoder?: 'onnx' | 'audio-tower') {
  const model = await loadModel(dir, undefined, { audioEncoder });
  const route = await createAudioRoute(model);
  try {
    return { model, route: { kind: route.kind, label: route.label }, ...(await route.encode(samples)) };
  } finally {
    await route.dispose();
  }
}

function relErr(a: Float32Array, b: Float32Array): number {
  let d = 0;
  let n = 0;
  for (let i = 0; i < b.length; i++) {
    d += (a[i] - b[i]) ** 2;
    n += b[i] ** 2;
  }
  return Math.sqrt(d / n);
}

describe('the ONNX audio encoder of a Hugging Face folder', () => {
  beforeAll(async () => {
    voxtral = await miniature('voxtral');
    onnxDir = await ensureOnnxEncoders();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-hf-onnx-'));
    const wav = join(tmp, 'clip.wav');
    execFileSync('espeak-ng', ['-w', wav, 'the quick brown fox'], { stdio: 'ignore' });
    samples = await toMono16k(new Uint8Array(readFileSync(wav)), 16000);
  }, 180_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("is the default route where the folder holds one; its embeddings are the audio tower's", async () => {
    const dir = folder('both', 'audio_encoder');
    const onnx = await embeddings(dir);
    expect(onnx.model.encoder).toMatchObject({
      kind: 'onnx',
      file: join(dir, 'onnx/audio_encoder.onnx'),
      input: 'audio_values',
      output: 'audio_features',
      modelType: 'voxtral',
    });
    expect(onnx.route.kind).toBe('onnx');
    expect(onnx.route.label).toContain('ONNX audio encoder');

    tower = await embeddings(dir, 'audio-tower');
    expect(tower.model.encoder?.kind).toBe('hf-audio-tower');
    expect(tower.route.kind).toBe('whisper');

    // One 30 s chunk: 375 rows of hidden_size.
    const H = onnx.model.config.hiddenSize;
    expect(onnx.audioLength).toBe(375);
    expect(tower.audioLength).toBe(375);
    expect(onnx.embeddings.length).toBe(375 * H);
    const err = relErr(onnx.embeddings, tower.embeddings);
    console.log(`ONNX route vs audio tower: relative error ${err.toExponential(2)}`);
    expect(err).toBeLessThan(1e-4);
    // Not trivially equal: the graph computed something of the audio's size.
    expect(Math.max(...tower.embeddings.map(Math.abs))).toBeGreaterThan(1e-3);
  }, 60_000);

  it('takes a dtype-suffixed file and a flat [chunks*375, hidden] output', async () => {
    // The flat export under the q4 name: the file is found by transformers.js's naming.
    const dir = folder('flat', 'audio_encoder_flat', 'audio_encoder_q4.onnx');
    const flat = await embeddings(dir);
    expect(flat.model.encoder).toMatchObject({ kind: 'onnx', file: join(dir, 'onnx/audio_encoder_q4.onnx') });
    expect(flat.audioLength).toBe(375);
    expect(relErr(flat.embeddings, tower!.embeddings)).toBeLessThan(1e-4);
  }, 60_000);

  // The cases below read the folder's encoder as the loader does (readHfOnnxEncoder) onto the
  // model loaded above, rather than loading the decoder again for each.
  it('reads the weights of an export stored as external data (audio_encoder.onnx_data)', async () => {
    const dir = folder('external');
    symlinkSync(join(onnxDir, 'external'), join(dir, 'onnx'));
    const src = await readHfOnnxEncoder(dir, tower!.model.family!, undefined);
    expect(src?.externalData?.path).toBe('audio_encoder.onnx_data');
    // The graph itself is small; the weights are in the data file.
    expect(src!.bytes.byteLength).toBeLessThan(src!.externalData!.data.byteLength);
    const route = await createAudioRoute({ ...tower!.model, encoder: src });
    try {
      expect(relErr((await route.encode(samples)).embeddings, tower!.embeddings)).toBeLessThan(1e-4);
    } finally {
      await route.dispose();
    }
  });

  it('a folder without one has no ONNX route; asking for ONNX there is a typed error', async () => {
    const dir = folder('none');
    expect(await readHfOnnxEncoder(dir, tower!.model.family!, undefined)).toBeUndefined();
    const err = await readHfOnnxEncoder(dir, tower!.model.family!, 'onnx').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelLoadError);
    expect((err as ModelLoadError).code).toBe('MODEL_LOAD');
    expect((err as ModelLoadError).file).toBe(join(dir, 'onnx/audio_encoder.onnx'));
  });

  for (const [variant, tensor, says] of [
    ['bad_input', 'audio_values', /expected an input named "audio_values"/],
    ['bad_width', 'audio_features', /63 values wide, the decoder's hidden_size is 64/],
  ] as const) {
    it(`${variant}: a typed MODEL_LOAD error naming the file`, async () => {
      const dir = folder(variant, variant);
      const src = await readHfOnnxEncoder(dir, tower!.model.family!, undefined);
      expect(src?.file).toBe(join(dir, 'onnx/audio_encoder.onnx'));
      const err = await createAudioRoute({ ...tower!.model, encoder: src }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ModelLoadError);
      expect((err as ModelLoadError).code).toBe('MODEL_LOAD');
      expect((err as ModelLoadError).file).toBe(join(dir, 'onnx/audio_encoder.onnx'));
      expect((err as ModelLoadError).tensor).toBe(tensor);
      expect((err as Error).message).toMatch(says);
    });
  }
});
