/**
 * The paged CPU backend on the decoder shapes of the paper's backbones (miniatures of
 * Voxtral, Qwen2.5-Omni and Qwen2-Audio: head_dim ≠ hidden/heads, 8:1 grouped-query and
 * multi-head attention, q/k/v biases, multi-token prompt prefixes) against a dense
 * forward written here from the Llama/Qwen2 decoder's definition, in f64, with none of
 * the backend's code: logits after the prompt and after each decode step, the prefill
 * scores and exported decode weights on audio positions, decoding after a plan that
 * drops every audio position (the prefix and instruction are text and must stay), and
 * the teacher-forced attention calibration reads.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { answerAttention } from '../../src/calibrate/attention.js';
import { audioStart, kvHeadCount, promptLength, type ModelConfig } from '../../src/model/config.js';
import type { DecoderWeights } from '../../src/model/weights.js';
import {
  decoderShapeConfig,
  randomDecoderWeights,
  randomEmbeddings,
  type DecoderShape,
} from '../../src/model/testing.js';
import type { PrefillPlan } from '../../src/kv/plan.js';

interface Dense {
  /** Logits after the last row. */
  logits: Float64Array;
  /** Per KV head: softmax mass of rows >= firstQuery on audio positions, summed over the group (and rows). */
  audioMass: Float64Array[];
}

/**
 * The decoder over `ids` (audio rows are -1 - audio index), all in f64. `hideAudioFrom`:
 * rows at or after it do not attend to audio positions (the audio KV was dropped).
 */
function denseForward(
  c: ModelConfig,
  w: DecoderWeights,
  audio: Float32Array,
  ids: number[],
  firstQuery: number,
  hideAudioFrom = Infinity,
): Dense {
  const D = c.hiddenSize;
  const hd = c.headDim;
  const H = c.numHeads;
  const HKV = c.numKvHeads;
  const group = H / HKV;
  const n = ids.length;
  const a0 = audioStart(c);
  const N = audio.length / D;
  const isAudio = (t: number) => t >= a0 && t < a0 + N;
  const x = ids.map((id) =>
    Float64Array.from(id >= 0 ? w.embed.subarray(id * D, (id + 1) * D) : audio.subarray((-1 - id) * D, -id * D)),
  );
  const linear = (W: Float32Array, rows: number, cols: number, v: Float64Array, bias?: Float32Array) => {
    const out = new Float64Array(rows);
    for (let r = 0; r < rows; r++) {
      let s = bias ? bias[r] : 0;
      for (let k = 0; k < cols; k++) s += W[r * cols + k] * v[k];
      out[r] = s;
    }
    return out;
  };
  const norm = (v: Float64Array, g: Float32Array) => {
    let ss = 0;
    for (const e of v) ss += e * e;
    const inv = 1 / Math.sqrt(ss / v.length + c.rmsNormEps);
    return v.map((e, i) => e * inv * g[i]);
  };
  // Rotate-half RoPE of every head of a vector at position pos.
  const rope = (v: Float64Array, heads: number, pos: number) => {
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const a = pos * Math.pow(c.ropeTheta, (-2 * i) / hd);
        const [p, q] = [v[h * hd + i], v[h * hd + i + hd / 2]];
        v[h * hd + i] = p * Math.cos(a) - q * Math.sin(a);
        v[h * hd + i + hd / 2] = q * Math.cos(a) + p * Math.sin(a);
      }
    }
  };
  const audioMass = Array.from({ length: kvHeadCount(c) }, () => new Float64Array(N));
  for (let l = 0; l < c.numLayers; l++) {
    const L = w.layers[l];
    const qs: Float64Array[] = [];
    const ks: Float64Array[] = [];
    const vs: Float64Array[] = [];
    for (let i = 0; i < n; i++) {
      const h = norm(x[i], L.attnNorm);
      const q = linear(L.q, H * hd, D, h, L.qBias);
      const k = linear(L.k, HKV * hd, D, h, L.kBias);
      rope(q, H, i);
      rope(k, HKV, i);
      qs.push(q);
      ks.push(k);
      vs.push(linear(L.v, HKV * hd, D, h, L.vBias));
    }
    for (let i = 0; i < n; i++) {
      const att = new Float64Array(H * hd);
      for (let h = 0; h < H; h++) {
        const kh = Math.floor(h / group);
        const seen: number[] = [];
        for (let t = 0; t <= i; t++) if (!(i >= hideAudioFrom && isAudio(t))) seen.push(t);
        const s = seen.map((t) => {
          let d = 0;
          for (let e = 0; e < hd; e++) d += qs[i][h * hd + e] * ks[t][kh * hd + e];
          return d / Math.sqrt(hd);
        });
        const m = Math.max(...s);
        const p = s.map((e) => Math.exp(e - m));
        const z = p.reduce((a, b) => a + b, 0);
        seen.forEach((t, j) => {
          for (let e = 0; e < hd; e++) att[h * hd + e] += (p[j] / z) * vs[t][kh * hd + e];
          if (i >= firstQuery && isAudio(t)) audioMass[l * HKV + kh][t - a0] += p[j] / z;
        });
      }
      const o = linear(L.o, D, H * hd, att);
      for (let e = 0; e < D; e++) x[i][e] += o[e];
    }
    for (let i = 0; i < n; i++) {
      const h = norm(x[i], L.mlpNorm);
      const g = linear(L.gate, c.intermediateSize, D, h);
      const u = linear(L.up, c.intermediateSize, D, h);
      const act = g.map((e, j) => (e / (1 + Math.exp(-e))) * u[j]);
      const d = linear(L.down, D, c.intermediateSize, act);
      for (let e = 0; e < D; e++) x[i][e] += d[e];
    }
  }
  return { logits: linear(w.lmHead, c.vocabSize, D, norm(x[n - 1], w.norm)), audioMass };
}

function nmse(ref: ArrayLike<number>, got: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < ref.length; i++) {
    num += (ref[i] - got[i]) ** 2;
    den += ref[i] ** 2;
  }
  expect(den).toBeGreaterThan(0);
  return num / den;
}

const N = 24;
const STEPS = 4;
const SHAPES: DecoderShape[] = ['voxtral', 'qwen2_5_omni', 'qwen2_audio'];

function promptIds(c: ModelConfig): number[] {
  return [...c.prefix, ...Array.from({ length: N }, (_, i) => -1 - i), ...c.instruction];
}

function plan(c: ModelConfig, keepAudio: boolean): PrefillPlan {
  const gpu = keepAudio ? Int32Array.from({ length: N }, (_, i) => i) : new Int32Array(0);
  return { heads: Array.from({ length: kvHeadCount(c) }, () => ({ gpu, cpu: new Int32Array(0) })) };
}

describe.each(SHAPES)('CPU backend on %s-shaped decoders', (shape) => {
  const c = decoderShapeConfig(shape);
  const w = randomDecoderWeights(c, 17);
  const audio = randomEmbeddings(c, N, 18);
  const heads = kvHeadCount(c);
  const decodeHeads = [0, heads - 1];
  const request = { decodeHeads, prefillQueries: c.instruction.length };

  it('has the shape it claims', () => {
    expect(c.prefix.length).toBeGreaterThanOrEqual(4);
    if (shape === 'voxtral') expect(c.numHeads * c.headDim).not.toBe(c.hiddenSize);
    if (shape === 'qwen2_5_omni') expect(c.numHeads / c.numKvHeads).toBe(8);
    if (shape === 'qwen2_audio') expect(c.numKvHeads).toBe(c.numHeads);
    expect(c.attentionBias).toBe(shape !== 'voxtral');
    expect(w.layers[0].qBias !== undefined).toBe(c.attentionBias);
  });

  it('prefill and decode logits, prefill scores and decode weights equal the dense forward (full cache)', async () => {
    const be = new CpuBackend(c, w);
    const pre = await be.open({ audioLength: N, maxNewTokens: STEPS + 1, request, returnLogits: true }).prefill(audio);
    const ids = promptIds(c);
    const n = promptLength(c, N);
    expect(ids).toHaveLength(n);
    const ref = denseForward(c, w, audio, ids, n - c.instruction.length);
    expect(nmse(ref.logits, pre.logits!)).toBeLessThan(1e-10);
    for (let h = 0; h < heads; h++) expect(nmse(ref.audioMass[h], pre.observation.scores[h])).toBeLessThan(1e-10);
    const session = await pre.place(plan(c, true));
    let token = pre.token;
    for (let s = 0; s < STEPS; s++) {
      const r = await session.step(token);
      ids.push(token);
      const d = denseForward(c, w, audio, ids, ids.length - 1);
      expect(nmse(d.logits, r.logits!)).toBeLessThan(1e-10);
      decodeHeads.forEach((h, i) => expect(nmse(d.audioMass[h], r.observation.weights[i])).toBeLessThan(1e-10));
      token = r.token;
    }
    session.close();
  });

  it("teacher-forced calibration attention is the dense forward's, on audio positions after the prefix", () => {
    const tokens = [30, 31, 32, 33];
    const rows = answerAttention(c, w, audio, N, tokens);
    expect(rows).toHaveLength(tokens.length);
    const ids = [...promptIds(c), ...tokens.slice(0, -1)];
    // The last teacher-forced row predicts the last token: its softmax on audio, summed over each group.
    const ref = denseForward(c, w, audio, ids, ids.length - 1).audioMass;
    const g = c.numHeads / c.numKvHeads;
    for (let l = 0; l < c.numLayers; l++) {
      for (let kh = 0; kh < c.numKvHeads; kh++) {
        const sum = new Float64Array(N);
        for (let j = 0; j < g; j++)
          rows[tokens.length - 1][l * c.numHeads + kh * g + j].forEach((a, p) => (sum[p] += a));
        expect(nmse(ref[l * c.numKvHeads + kh], sum)).toBeLessThan(1e-10);
      }
    }
  });

  it('after a plan that drops all audio, decode attends to the prefix, instruction and generated tokens', async () => {
    const be = new CpuBackend(c, w);
    const pre = await be.open({ audioLength: N, maxNewTokens: STEPS + 1, request, returnLogits: true }).prefill(audio);
    const session = await pre.place(plan(c, false));
    expect(session.residency().rGpu).toBe(0);
    const ids = promptIds(c);
    const n = ids.length;
    let token = pre.token;
    for (let s = 0; s < 3; s++) {
      const r = await session.step(token);
      ids.push(token);
      expect(nmse(denseForward(c, w, audio, ids, ids.length - 1, n).logits, r.logits!)).toBeLessThan(1e-10);
      token = r.token;
    }
    session.close();
  });
});
