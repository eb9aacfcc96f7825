/**
 * The calibration core the page and the CLI share (src/calibrate/runtime.ts): the cost in
 * forwards it announces, progress per clip and per head with the time left, and a run
 * stopped after a clip that resumes from the store into the same heads as a run never
 * stopped. The audio encoder is left out (random embeddings of the clip's length): what is
 * checked here is the bookkeeping around the decoder's forwards.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  calibrateClips,
  forwardsPerClip,
  type CalibrationProgress,
  type ClipSource,
  type EncodeAudio,
  type PartialFile,
  type PartialStore,
} from '../../src/calibrate/runtime.js';
import { loadModel, type LoadedModel } from '../../src/model/loader.js';
import { randomEmbeddings } from '../../src/model/testing.js';
import { headsFileFault } from '../../src/model/heads.js';
import { kvHeadCount } from '../../src/model/config.js';
import { pythonHasOnnx, toneWav, writeTinyModel } from '../helpers/tiny-model.js';

describe('forwards a clip costs', () => {
  it('finite differences: 2 + M · H_kv · Σ_l (L − l) / L', () => {
    expect(forwardsPerClip({ numLayers: 2, numKvHeads: 4 }, 'finite-difference', 1)).toBe(8);
    expect(forwardsPerClip({ numLayers: 4, numKvHeads: 2 }, 'finite-difference', 4)).toBe(22);
    // Voxtral-Mini-3B: 30 layers of 8 KV heads.
    expect(forwardsPerClip({ numLayers: 30, numKvHeads: 8 }, 'finite-difference', 2)).toBe(250);
  });

  it('the answer path: one forward, whatever the heads (its answer-row backward is in the FLOPs); the direct path two', () => {
    expect(forwardsPerClip({ numLayers: 30, numKvHeads: 8 }, 'answer-path', 2)).toBe(1);
    expect(forwardsPerClip({ numLayers: 4, numKvHeads: 8 }, 'answer-path', 0)).toBe(1);
    expect(forwardsPerClip({ numLayers: 30, numKvHeads: 8 }, 'direct-path', 2)).toBe(2);
  });
});

/** A store in memory, as the page's OPFS store and the CLI's file behave: whole snapshots. */
function memoryStore(): PartialStore & { value: PartialFile | null; cleared: number } {
  const s = {
    value: null as PartialFile | null,
    cleared: 0,
    load: async () => (s.value ? (JSON.parse(JSON.stringify(s.value)) as PartialFile) : null),
    save: async (p: PartialFile) => void (s.value = JSON.parse(JSON.stringify(p)) as PartialFile),
    clear: async () => void ((s.value = null), s.cleared++),
  };
  return s;
}

describe.skipIf(!pythonHasOnnx())('calibrateClips', () => {
  let model: LoadedModel;
  let clips: ClipSource[];
  let encode: EncodeAudio;
  beforeAll(async () => {
    model = await loadModel(writeTinyModel());
    const words = [
      { word: 'ab', start: 0, end: 0.4 },
      { word: 'cd', start: 0.4, end: 0.8 },
      { word: 'ef', start: 0.8, end: 1.2 },
    ];
    clips = [1.2, 2.4, 1.6].map((s, i) => ({ id: `c${i + 1}`, text: 'ab cd ef', words, read: async () => toneWav(s) }));
    encode = async (samples) => {
      const N = Math.floor((samples.length / 16000) * model.config.audio.tokensPerSecond);
      return { embeddings: randomEmbeddings(model.config, N, N), audioLength: N };
    };
  });

  it('reports every KV head of every clip in turn, a growing fraction and the time left once a forward is timed', async () => {
    let t = 0;
    const seen: CalibrationProgress[] = [];
    const heads = await calibrateClips(model, encode, clips, {
      estimator: 'finite-difference',
      directions: 1,
      now: () => (t += 5),
      onProgress: (p) => seen.push(p),
    });
    const H = kvHeadCount(model.config);
    expect(heads && headsFileFault(heads, H)).toBeUndefined();
    for (const [i, clip] of clips.entries()) {
      const mine = seen.filter((p) => p.id === clip.id);
      expect(mine.every((p) => p.clip === i + 1 && p.clips === 3 && p.heads === H)).toBe(true);
      expect(mine.filter((p) => !p.finished).map((p) => p.head)).toEqual([
        0,
        ...Array.from({ length: H }, (_, h) => h + 1),
      ]);
      expect(mine.at(-1)?.finished?.reused).toBe(false);
    }
    const f = seen.map((p) => p.fraction);
    f.slice(1).forEach((x, i) => expect(x).toBeGreaterThanOrEqual(f[i] - 1e-12));
    expect(f.at(-1)).toBeCloseTo(1);
    // Every event after the first forward has a time left; it is gone at the end.
    expect(seen[0].secondsLeft).not.toBeNull();
    expect(seen.filter((p) => p.fraction < 1 - 1e-9).every((p) => p.secondsLeft !== null && p.secondsLeft > 0)).toBe(
      true,
    );
    expect(seen.at(-1)?.secondsLeft).toBe(0);
  });

  it('the time left follows the measured time per forward: twice as slow a clock, twice the seconds', async () => {
    const left = async (ms: number) => {
      let t = 0;
      const seen: CalibrationProgress[] = [];
      await calibrateClips(model, encode, clips.slice(0, 2), {
        estimator: 'finite-difference',
        directions: 1,
        now: () => (t += ms),
        onProgress: (p) => seen.push(p),
      });
      return seen.find((p) => p.clip === 1 && p.head === 1)!.secondsLeft!;
    };
    const a = await left(5);
    expect(a).toBeGreaterThan(0);
    expect(await left(10)).toBeCloseTo(2 * a, 6);
  });

  it("a clip's stated seconds weigh it before it is encoded; without them it counts as a typical clip", async () => {
    const afterFirst = async (two: ClipSource[]) => {
      const seen: CalibrationProgress[] = [];
      await calibrateClips(model, encode, two, {
        estimator: 'finite-difference',
        directions: 1,
        onProgress: (p) => seen.push(p),
      });
      return seen.find((p) => p.clip === 1 && p.finished)!.fraction;
    };
    const [short, long] = [clips[0], clips[1]];
    expect(await afterFirst([short, long])).toBeCloseTo(0.5, 9);
    // 1.2 s and 2.4 s: 15 and 30 audio tokens, prompts of 15 + 3 and 30 + 3 rows.
    const p = (n: number) => n + model.config.prefix.length + model.config.instruction.length;
    expect(
      await afterFirst([
        { ...short, seconds: 1.2 },
        { ...long, seconds: 2.4 },
      ]),
    ).toBeCloseTo(p(15) / (p(15) + p(30)), 9);
  });

  it('stopped after a clip, resumes from the store and ends with the heads of a run never stopped', async () => {
    const whole = await calibrateClips(model, encode, clips, { estimator: 'finite-difference', directions: 1 });
    const store = memoryStore();
    const stop = new AbortController();
    const first = await calibrateClips(model, encode, clips, {
      estimator: 'finite-difference',
      directions: 1,
      store,
      signal: stop.signal,
      onProgress: (p) => p.finished && stop.abort(),
    });
    expect(first).toBeNull();
    expect(store.value?.clips.map((c) => c.id)).toEqual(['c1']);
    const reused: Array<[string, boolean]> = [];
    const second = await calibrateClips(model, encode, clips, {
      estimator: 'finite-difference',
      directions: 1,
      store,
      onProgress: (p) => p.finished && reused.push([p.id, p.finished.reused]),
    });
    expect(reused).toEqual([
      ['c1', true],
      ['c2', false],
      ['c3', false],
    ]);
    expect(store.value).toBeNull();
    expect(store.cleared).toBe(1);
    expect(second).toEqual(whole);
  });

  it('the answer path by default: one forward a clip, its estimator named in heads.json, resumed as the other', async () => {
    let t = 0;
    const seen: CalibrationProgress[] = [];
    const store = memoryStore();
    const stop = new AbortController();
    const first = await calibrateClips(model, encode, clips, {
      store,
      signal: stop.signal,
      now: () => (t += 5),
      onProgress: (p) => {
        seen.push(p);
        if (p.finished) stop.abort();
      },
    });
    expect(first).toBeNull();
    expect(store.value?.settings.estimator).toBe('answer-path');
    // One event after the clip's forward and backward, one when it is finished.
    expect(seen.map((p) => [p.id, p.head, !!p.finished])).toEqual([
      ['c1', 0, false],
      ['c1', kvHeadCount(model.config), true],
    ]);
    const heads = await calibrateClips(model, encode, clips, { store });
    expect(heads?.sensitivityEstimator).toBe('answer-path');
    expect(heads && headsFileFault(heads, kvHeadCount(model.config))).toBeUndefined();
    expect(heads).toEqual(await calibrateClips(model, encode, clips));
  });

  it('finished clips of other settings are not reused; of the same settings they are', async () => {
    const reusedWith = async (directions: number) => {
      const store = memoryStore();
      store.value = {
        model: model.config.name,
        settings: { estimator: 'finite-difference', directions: 2, step: 0.01, blockSize: null },
        clips: [
          {
            id: 'c1',
            audioLength: 15,
            voice: { perQueryHead: null, tokens: 0, skipped: 0 },
            sensitivity: { sum: Array.from({ length: kvHeadCount(model.config) }, () => 1), tokens: 1, meanCe: 1 },
          },
        ],
      };
      const reused: boolean[] = [];
      await calibrateClips(model, encode, clips.slice(0, 1), {
        estimator: 'finite-difference',
        directions,
        store,
        onProgress: (p) => p.finished && reused.push(p.finished.reused),
      });
      return reused;
    };
    expect(await reusedWith(1)).toEqual([false]);
    expect(await reusedWith(2)).toEqual([true]);
  });
});
