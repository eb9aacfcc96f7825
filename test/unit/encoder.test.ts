import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AudioEncoder, encodeWindowed, encoderWindows } from '../../src/model/encoder.js';
import { parseConfig } from '../../src/model/config.js';
import { referenceConfig } from '../../src/model/testing.js';
import { SafeTensors } from '../../src/model/safetensors.js';
import { LogMel } from '../../src/audio/mel.js';
import { toMono16k } from '../../src/audio/decode.js';
import { CancelledError, ModelLoadError } from '../../src/errors.js';
import { tempDir } from '../helpers/temp.js';

const AUDIO = { nMels: 3, framesPerToken: 4, encoderWindowFrames: 12 };

/** A stand-in encoder whose output row r of a window is [window index, first frame of the row, mel[0] there, frames]. */
function fakeRun(log: { frames: number; active: number; maxActive: number }[]) {
  let active = 0;
  let maxActive = 0;
  let calls = 0;
  return async (mel: Float32Array, frames: number): Promise<Float32Array> => {
    active++;
    maxActive = Math.max(maxActive, active);
    const call = calls++;
    await new Promise((r) => setTimeout(r, 1));
    const rows = frames / AUDIO.framesPerToken;
    const out = new Float32Array(rows * 4);
    for (let r = 0; r < rows; r++)
      out.set([call, r * AUDIO.framesPerToken, mel[r * AUDIO.framesPerToken], frames], r * 4);
    active--;
    log.push({ frames, active, maxActive });
    return out;
  };
}

describe('encoder windowing', () => {
  it('cuts T frames into full windows and a last one trimmed to a multiple of framesPerToken', () => {
    expect(encoderWindows(30, 12, 4)).toEqual([
      { start: 0, frames: 12, token: 0 },
      { start: 12, frames: 12, token: 3 },
      { start: 24, frames: 4, token: 6 },
    ]);
    expect(encoderWindows(27, 12, 4).map((w) => w.frames)).toEqual([12, 12]); // 3-frame tail < one token
    expect(encoderWindows(3, 12, 4)).toEqual([]);
    expect(encoderWindows(0, 12, 4)).toEqual([]);
    for (let T = 0; T < 100; T++)
      expect(encoderWindows(T, 12, 4).reduce((a, w) => a + w.frames / 4, 0)).toBe(Math.floor(T / 4));
    expect(() => encoderWindows(10, 10, 4)).toThrow(RangeError);
  });

  it('feeds each window its own mel columns and concatenates the outputs in order', async () => {
    const T = 31;
    const mel = new Float32Array(AUDIO.nMels * T);
    for (let m = 0; m < AUDIO.nMels; m++) for (let t = 0; t < T; t++) mel[m * T + t] = m * 1000 + t;
    const log: { frames: number; active: number; maxActive: number }[] = [];
    const progress: [number, number][] = [];
    const out = await encodeWindowed(mel, T, AUDIO, 4, fakeRun(log), { onProgress: (d, n) => progress.push([d, n]) });
    expect(out.length).toBe(Math.floor(T / 4) * 4);
    expect(log.map((l) => l.frames)).toEqual([12, 12, 4]);
    expect(Math.max(...log.map((l) => l.maxActive))).toBe(1); // never two runs at once
    expect(progress).toEqual([
      [1, 3],
      [2, 3],
      [3, 3],
    ]);
    for (let n = 0; n < 7; n++) {
      const [call, rowFrame, mel0, frames] = out.subarray(n * 4, n * 4 + 4);
      const w = Math.floor((n * 4) / 12);
      expect(call).toBe(w);
      expect(w * 12 + rowFrame).toBe(n * 4);
      expect(mel0).toBe(n * 4); // row 0 of the global mel at this token's first frame
      expect(frames).toBe(w < 2 ? 12 : 4);
    }
  });

  it('passes the whole mel through untouched when it fits one window', async () => {
    const mel = new Float32Array(AUDIO.nMels * 8).map((_, i) => i);
    let seen: Float32Array | undefined;
    await encodeWindowed(mel, 8, AUDIO, 1, async (m, f) => ((seen = m), new Float32Array(f / 4)));
    expect(seen).toBe(mel);
  });

  it('stops between windows when cancelled and rejects wrongly shaped outputs', async () => {
    const ctl = new AbortController();
    const mel = new Float32Array(AUDIO.nMels * 48);
    let runs = 0;
    const p = encodeWindowed(
      mel,
      48,
      AUDIO,
      2,
      async (_m, f) => {
        if (++runs === 2) ctl.abort();
        return new Float32Array((f / 4) * 2);
      },
      { signal: ctl.signal },
    );
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(runs).toBe(2);
    await expect(encodeWindowed(mel, 48, AUDIO, 2, async () => new Float32Array(5))).rejects.toThrow(ModelLoadError);
    await expect(encodeWindowed(mel, 49, AUDIO, 2, async () => new Float32Array(0))).rejects.toThrow(RangeError);
  });
});

const PY = '/usr/bin/python3';

function pythonHasOnnx(): boolean {
  try {
    execFileSync(PY, ['-c', 'import onnx, numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('AudioEncoder with onnxruntime-web (wasm in Node)', () => {
  it('runs a small ONNX encoder (built with python onnx) window by window, matching a TS reference', async (ctx) => {
    if (!pythonHasOnnx()) ctx.skip('needs /usr/bin/python3 with the onnx and numpy modules to build the test model');
    // embeddings[n, h] = sum over the n-th group of framesPerToken frames and mels of mel · W[(f, m), h], as
    // Transpose -> Reshape [1, -1, fpt·nMels] -> MatMul: dynamic time axis, exact in float32 up to rounding.
    const dir = tempDir('wnw-enc-');
    const file = join(dir, 'fake.onnx');
    const base = referenceConfig({ hiddenSize: 16 });
    const cfg = { ...base, audio: { ...base.audio, encoderWindowFrames: 1600 } };
    const { nMels, framesPerToken: fpt } = cfg.audio;
    const script = `
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
K = ${fpt * nMels}
W = ((np.arange(K * 16).reshape(K, 16) % 7) - 3).astype(np.float32) / 8
g = helper.make_graph([
  helper.make_node('Transpose', ['mel'], ['mt'], perm=[0, 2, 1]),
  helper.make_node('Reshape', ['mt', 'shape'], ['grouped']),
  helper.make_node('MatMul', ['grouped', 'W'], ['embeddings']),
], 'fake', [helper.make_tensor_value_info('mel', TensorProto.FLOAT, [1, ${nMels}, 'T'])],
  [helper.make_tensor_value_info('embeddings', TensorProto.FLOAT, [1, 'N', 16])],
  [numpy_helper.from_array(np.array([1, -1, K], dtype=np.int64), 'shape'), numpy_helper.from_array(W, 'W')])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, ${JSON.stringify(file)})
`;
    execFileSync(PY, ['-c', script], { stdio: 'inherit' });
    const enc = await AudioEncoder.create(file, cfg);
    expect(enc.executionProvider).toBe('wasm');
    const T = 1600 * 2 + 805; // two full windows and a tail trimmed from 805 to 800 frames
    const mel = new Float32Array(nMels * T).map((_, i) => Math.sin(i * 0.37));
    const windows: number[] = [];
    const [a, b] = await Promise.all([enc.encode(mel, T, { onProgress: (d) => windows.push(d) }), enc.encode(mel, T)]);
    const N = Math.floor(T / fpt);
    expect(a.length).toBe(N * 16);
    expect(windows).toEqual([1, 2, 3]);
    const K = fpt * nMels;
    let maxErr = 0;
    for (let n = 0; n < N; n++) {
      for (let h = 0; h < 16; h++) {
        let acc = 0;
        for (let f = 0; f < fpt; f++)
          for (let m = 0; m < nMels; m++)
            acc += (mel[m * T + n * fpt + f] * ((((f * nMels + m) * 16 + h) % 7) - 3)) / 8;
        maxErr = Math.max(maxErr, Math.abs(a[n * 16 + h] - acc), Math.abs(b[n * 16 + h] - acc));
      }
    }
    expect(maxErr).toBeLessThan(1e-4);
    // From samples, mel computed per window: identical to encoding the whole mel.
    const samples = new Float32Array(160 * 3300 + 57).map((_, i) => 0.3 * Math.sin(i * 0.01) + 0.1 * Math.sin(i * 1.3));
    const lm = new LogMel(cfg.audio);
    const whole = await enc.encode(lm.compute(samples), lm.frames(samples.length));
    const perWindow = await enc.encodeSamples(samples);
    expect(perWindow.length).toBe(Math.floor(3300 / fpt) * 16);
    expect(Array.from(perWindow)).toEqual(Array.from(whole));
    expect(await enc.gpuDevice()).toBeUndefined();
    await enc.dispose();
    await expect(enc.runWindow(mel, 8)).rejects.toThrow(/dispose/);
  });

  it('fails at load with ModelLoadError for a missing file, garbage bytes, or wrong tensor names', async (ctx) => {
    const cfg = referenceConfig();
    await expect(AudioEncoder.create('/nonexistent/encoder.onnx', cfg)).rejects.toThrow(/encoder.onnx.*cannot read/);
    await expect(AudioEncoder.create(new Uint8Array([1, 2, 3, 4]), cfg)).rejects.toThrow(ModelLoadError);
    if (!pythonHasOnnx()) ctx.skip('needs /usr/bin/python3 with the onnx module to build a mis-named model');
    const file = join(tempDir('wnw-enc-'), 'bad.onnx');
    execFileSync(PY, [
      '-c',
      `
import onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'bad',
  [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 80, 'T'])], [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 80, 'T'])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8), ${JSON.stringify(file)})
`,
    ]);
    await expect(AudioEncoder.create(file, cfg)).rejects.toThrow(/input named "mel"/);
  });
});

const MODEL = join(process.cwd(), 'public', 'models', 'wnw-ref');

describe('wnw-ref encoder vs golden fixtures', () => {
  for (const clip of ['clip1', 'clip2']) {
    it(`${clip}: mel and embeddings match training's fixtures`, async (ctx) => {
      const fixture = join(MODEL, 'fixtures', `${clip}.safetensors`);
      if (!existsSync(join(MODEL, 'encoder.onnx')))
        ctx.skip('public/models/wnw-ref/encoder.onnx is absent: the trained model has not landed yet');
      if (!existsSync(fixture))
        ctx.skip(`public/models/wnw-ref/fixtures/${clip}.safetensors is absent: no golden fixture yet`);
      const cfg = parseConfig(JSON.parse(readFileSync(join(MODEL, 'config.json'), 'utf8')));
      const buf = readFileSync(fixture);
      const st = new SafeTensors(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength), fixture);
      const wantMel = st.f32('mel');
      const [nMels, T] = st.info('mel').shape;
      expect(nMels).toBe(cfg.audio.nMels);

      const samples = await toMono16k(readFileSync(join(MODEL, 'fixtures', `${clip}.wav`)), cfg.audio.sampleRate);
      const lm = new LogMel(cfg.audio);
      // Training trims the mel to whole audio tokens; the runtime's encoder windows do the same.
      const Tall = lm.frames(samples.length);
      expect(T).toBe(Tall - (Tall % cfg.audio.framesPerToken));
      const mel = lm.compute(samples);
      const raw = lm.compute(samples, { normalize: false });
      let lo = Infinity;
      let hi = -Infinity;
      let melErr = 0;
      let rawErr = 0;
      for (let m = 0; m < nMels; m++) {
        for (let t = 0; t < T; t++) {
          const w = wantMel[m * T + t];
          lo = Math.min(lo, w);
          hi = Math.max(hi, w);
          melErr = Math.max(melErr, Math.abs(mel[m * Tall + t] - w));
          rawErr = Math.max(rawErr, Math.abs(raw[m * Tall + t] - w));
        }
      }
      // The fixture's mel is the encoder input, i.e. normalised; the raw error says whether it was saved before normalising.
      expect(melErr / (hi - lo), `max abs error ${melErr} (vs un-normalised ln-mel: ${rawErr})`).toBeLessThan(1e-3);

      const want = st.f32('embeddings');
      const [N, H] = st.info('embeddings').shape;
      expect([N, H]).toEqual([Math.floor(T / cfg.audio.framesPerToken), cfg.hiddenSize]);
      const enc = await AudioEncoder.create(join(MODEL, 'encoder.onnx'), cfg);
      const got = await enc.encode(wantMel, T); // the fixture's mel, so this checks the encoder alone
      await enc.dispose();
      let num = 0;
      let den = 0;
      for (let i = 0; i < want.length; i++) {
        num += (got[i] - want[i]) ** 2;
        den += want[i] ** 2;
      }
      expect(den).toBeGreaterThan(0);
      expect(num / den).toBeLessThan(1e-5);
    });
  }
});
