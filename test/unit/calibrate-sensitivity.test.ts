/**
 * The forward-only Head Sensitivity (src/calibrate/sensitivity.ts) and `wnw calibrate`
 * (src/calibrate/run.ts): output shape and finiteness, resuming after a stop, and a
 * heads.json the loader accepts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { clipSensitivity } from '../../src/calibrate/sensitivity.js';
import { spearman, roleDifferences } from '../../src/calibrate/compare.js';
import { calibrateRuntime, partialPath } from '../../src/calibrate/run.js';
import { kvHeadCount } from '../../src/model/config.js';
import { headsFileFault } from '../../src/model/heads.js';
import { loadModel, type LoadedModel } from '../../src/model/loader.js';
import { randomDecoderWeights, randomEmbeddings, referenceConfig } from '../../src/model/testing.js';
import { parseHeadsFile } from '../../src/policy/wnw/triage.js';
import { createAudioRoute } from '../../src/route/audio-route.js';
import { runCli } from '../../src/cli/main.js';
import { pythonHasOnnx, toneWav, writeTinyModel } from '../helpers/tiny-model.js';
import { tempDir } from '../helpers/temp.js';

describe('forward-only head sensitivity', () => {
  const c = referenceConfig({ numLayers: 2, hiddenSize: 64, intermediateSize: 128, vocabSize: 64 });
  const w = randomDecoderWeights(c, 3);
  const N = 20;
  const audio = randomEmbeddings(c, N, 4);
  const answer = [5, 9, 17, 2];

  it('gives one finite, non-negative value per KV head, the same for the same seed', () => {
    const r = clipSensitivity(c, w, audio, N, answer, { directions: 2, seed: 5 });
    expect(r.sum).toHaveLength(kvHeadCount(c));
    expect(r.sum.every((x) => Number.isFinite(x) && x >= 0)).toBe(true);
    expect(r.sum.some((x) => x > 0)).toBe(true);
    expect(r.tokens).toBe(answer.length);
    expect(Number.isFinite(r.meanCe) && r.meanCe > 0).toBe(true);
    expect(clipSensitivity(c, w, audio, N, answer, { directions: 2, seed: 5 }).sum).toEqual(r.sum);
    const blocks = clipSensitivity(c, w, audio, N, answer, { directions: 1, blockSize: 7 });
    expect(blocks.sum.every((x) => Number.isFinite(x) && x > 0)).toBe(true);
  });

  it('estimates the same norm at half the step (the difference is linear in ε)', () => {
    const a = clipSensitivity(c, w, audio, N, answer, { directions: 2, seed: 5, step: 1e-2 });
    const b = clipSensitivity(c, w, audio, N, answer, { directions: 2, seed: 5, step: 5e-3 });
    a.sum.forEach((x, h) => expect(b.sum[h]).toBeCloseTo(x, -Math.floor(Math.log10(x)) + 1));
  });
});

describe('comparing two calibrations', () => {
  it('Spearman is 1 for the same order, −1 reversed, and ties share their rank', () => {
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 40])).toBeCloseTo(1);
    expect(spearman([1, 2, 3, 4], [4, 3, 2, 1])).toBeCloseTo(-1);
    expect(spearman([1, 1, 2], [5, 5, 9])).toBeCloseTo(1);
  });

  it('counts the heads whose role changes', () => {
    const vs = Array.from({ length: 16 }, () => 1);
    const hs = Array.from({ length: 16 }, (_, i) => i + 1);
    expect(roleDifferences(vs, hs, hs, [0.2]).map((d) => d.differ)).toEqual([0]);
    expect(roleDifferences(vs, hs, [...hs].reverse(), [0.2])[0].differ).toBeGreaterThan(0);
  });
});

describe.skipIf(!pythonHasOnnx())('wnw calibrate on a tiny random model', () => {
  let dir: string;
  let clips: string;
  let model: LoadedModel;
  beforeAll(async () => {
    dir = writeTinyModel();
    clips = tempDir('wnw-clips-');
    for (const id of ['c1', 'c2', 'c3']) {
      writeFileSync(join(clips, `${id}.wav`), toneWav(1.2));
      writeFileSync(
        join(clips, `${id}.json`),
        JSON.stringify({
          text: 'ab cd ef',
          words: [
            { word: 'ab', start: 0, end: 0.4 },
            { word: 'cd', start: 0.4, end: 0.8 },
            { word: 'ef', start: 0.8, end: 1.2 },
          ],
        }),
      );
    }
    model = await loadModel(dir);
  });

  it('stops after a clip, resumes from the partial file, and writes a heads.json the loader accepts', async () => {
    const route = await createAudioRoute(model, { file: join(dir, 'encoder.onnx') });
    const encode = (s: Float32Array) => route.encode(s);
    const out = join(dir, 'heads.json');
    const stop = new AbortController();
    const first: string[] = [];
    const stopped = await calibrateRuntime(model, encode, {
      modelDir: dir,
      clipsDir: clips,
      directions: 1,
      signal: stop.signal,
      onClip: (_done, _total, id) => {
        first.push(id);
        stop.abort();
      },
    });
    expect(stopped).toBeNull();
    expect(first).toEqual(['c1']);
    const partial = JSON.parse(readFileSync(partialPath(out), 'utf8'));
    expect(partial.clips.map((r: { id: string }) => r.id)).toEqual(['c1']);

    const second: Array<[string, boolean]> = [];
    const heads = await calibrateRuntime(model, encode, {
      modelDir: dir,
      clipsDir: clips,
      directions: 1,
      onClip: (_d, _t, id, _s, reused) => second.push([id, reused]),
    });
    await route.dispose();
    expect(second).toEqual([
      ['c1', true],
      ['c2', false],
      ['c3', false],
    ]);
    expect(existsSync(partialPath(out))).toBe(false);
    expect(heads?.sensitivityEstimator).toBe('finite-difference');
    const json = JSON.parse(readFileSync(out, 'utf8'));
    expect(() => parseHeadsFile(json, model.config.numLayers, model.config.numKvHeads)).not.toThrow();
    expect(json.headSensitivity.every((x: number) => Number.isFinite(x) && x >= 0)).toBe(true);
    expect((await loadModel(dir)).heads?.sensitivityEstimator).toBe('finite-difference');
    const { numLayers, numKvHeads } = model.config;
    expect(() => parseHeadsFile({ ...json, sensitivityEstimator: 'autograd' }, numLayers, numKvHeads)).toThrow(
      /sensitivityEstimator/,
    );
    expect(headsFileFault({ ...json, sensitivityEstimator: 'autograd' }, numLayers * numKvHeads)).toMatch(
      /sensitivityEstimator/,
    );
  });

  it('--out in a folder not there yet: the folder is made', async () => {
    const out = join(tempDir('wnw-out-'), 'not', 'yet', 'heads.json');
    const route = await createAudioRoute(model, { file: join(dir, 'encoder.onnx') });
    try {
      await calibrateRuntime(model, (s) => route.encode(s), {
        modelDir: dir,
        clipsDir: clips,
        limit: 1,
        out,
        directions: 1,
      });
    } finally {
      await route.dispose();
    }
    expect(existsSync(out)).toBe(true);
    expect(existsSync(partialPath(out))).toBe(false);
  });

  it('a partial file of other settings is not reused', async () => {
    const out = join(tempDir('wnw-out-'), 'heads.json');
    writeFileSync(
      partialPath(out),
      JSON.stringify({
        model: model.config.name,
        settings: { directions: 3, step: 0.01, blockSize: null },
        clips: [{ id: 'c1' }],
      }),
    );
    const route = await createAudioRoute(model, { file: join(dir, 'encoder.onnx') });
    const seen: boolean[] = [];
    await calibrateRuntime(model, (s) => route.encode(s), {
      modelDir: dir,
      clipsDir: clips,
      limit: 1,
      out,
      directions: 1,
      onClip: (_d, _t, _id, _s, reused) => seen.push(reused),
    });
    await route.dispose();
    expect(seen).toEqual([false]);
  });

  it('the CLI answers a usage error with its usage', async () => {
    const err: string[] = [];
    const io = {
      load: async () => {
        throw new Error('unused');
      },
      stdout: () => {},
      stderr: (s: string) => err.push(s),
      readFile: async () => new Uint8Array(),
      decode: async () => new Float32Array(),
      tty: false,
    };
    expect(await runCli(['calibrate', '--clips', clips], io)).toBe(2);
    expect(err.join('')).toMatch(/--model DIR is required[\s\S]*usage: wnw calibrate/);
  });
});
