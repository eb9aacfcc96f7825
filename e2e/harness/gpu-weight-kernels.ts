/**
 * The decoder kernels that read weights in a format besides the dense products: the
 * embedding gather over a table split by rows across bindings (Voxtral's hidden size
 * 3,072, q4 and f16) and the decode QKV projection + RoPE + KV append with q4 and f16
 * Wqkv (Voxtral: 32 + 2 × 8 heads of 128; Qwen2.5-Omni: 16 + 2 × 2 heads, hidden 2,048,
 * q/k/v biases), against the plain-TS product of the same dequantised weights (NMSE
 * ≤ 1e-6, the bound of the other weight-format kernels).
 */
import { referenceConfig, randomArray, rng } from '../../src/model/testing.js';
import type { ModelConfig } from '../../src/model/config.js';
import type { HfFamily } from '../../src/model/families/types.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { voxtral as voxtralFamily } from '../../src/model/families/voxtral.js';
import { hfModelConfig } from '../../src/model/hf/config.js';
import {
  WEIGHT_FORMAT_ID,
  dequantizeRow,
  pack,
  referenceMatvec,
  roundBf16,
  type WeightFormat,
} from '../../src/model/quant.js';
import { addBias, rope, ropeFrequencies } from '../../src/reference/ops.js';
import { grid, modelConstants, ropeTable } from '../../src/backend/webgpu/kernels.js';
import { uploadMatrix, destroyMatrix } from '../../src/backend/webgpu/weight-formats.js';
import { compare, dispatch, empty, gpu, readF32, upload, type CheckResult } from './gpu-util.js';

const BOUND = 1e-6;

/** The released checkpoint's decoder shapes (from the family record) on the reference model's config. */
function releasedShapes(family: HfFamily): ModelConfig {
  const r = family.shapes.released!;
  const { vocabSize, hiddenSize, intermediateSize, numHeads, numKvHeads, headDim, ropeTheta, attentionBias } =
    hfModelConfig(family, r.json, `${r.name}/config.json`).config;
  return referenceConfig({
    name: `${r.name} shapes`,
    vocabSize,
    hiddenSize,
    intermediateSize,
    numHeads,
    numKvHeads,
    headDim,
    ropeTheta,
    attentionBias,
  });
}

const voxtral = releasedShapes(voxtralFamily);
const omni = releasedShapes(qwen25Omni);

function bf16(n: number, scale: number, seed: number): Float32Array {
  return roundBf16(randomArray(n, scale, rng(seed)));
}

function constants(c: ModelConfig, format: WeightFormat) {
  return { ...modelConstants(c, 16), WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] };
}

/**
 * 4,096 rows of a D = 3,072 table under a 2 MiB binding cap (q4: 4 parts, f16: 11), one
 * dispatch per part: 200 prompt rows, token ids from every part and 50 audio rows.
 */
async function embedCase(format: WeightFormat): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const c = voxtral;
  const D = c.hiddenSize;
  const V = 4096;
  const table = pack(format, bf16(V * D, 1, 31), V, D);
  const pipeline = await cache.get('embed.wgsl', 'embed', constants(c, format));
  const m = await uploadMatrix(ctx, 'embed', table, 2 * 2 ** 20);
  const r = rng(5);
  const n = 200;
  const A = 50;
  const ids = Int32Array.from({ length: n }, (_, i) => (i >= 20 && i < 20 + A ? -1 - (i - 20) : Math.floor(r() * V)));
  ids[199] = V - 1;
  const audio = randomArray(A * D, 1, r);
  // Audio rows are in x before the pass (the prefill writes them); token rows hold stale values.
  const x0 = randomArray(n * D, 100, r);
  x0.set(audio, 20 * D);
  const x = upload(ctx, x0);
  const idsB = upload(ctx, ids);
  for (const p of m.parts)
    dispatch(ctx, pipeline, [p.buffer, idsB, x, ctx.uniform('p', [n, p.row0, p.row0 + p.rows, 0])], ...grid(n));
  const got = await readF32(ctx, x, n * D);
  destroyMatrix(ctx, m);
  const want = new Float32Array(n * D);
  for (let i = 0; i < n; i++) {
    if (ids[i] >= 0) dequantizeRow(table, ids[i], want, i * D);
    else want.set(audio.subarray((-1 - ids[i]) * D, -ids[i] * D), i * D);
  }
  let exact = 0;
  for (let i = 0; i < want.length; i++) if (want[i] === got[i]) exact++;
  // q4 code 8 is an exact 0 (1 weight in 16): the unwritten-output guard allows for it.
  const res = compare(
    `embed_${format}_split (${m.parts.length} parts of ${V} x ${D})`,
    want,
    got,
    BOUND,
    t0,
    0.9,
    `exact ${exact}/${want.length}`,
  );
  return { ...res, pass: res.pass && m.parts.length > 1 && exact === want.length };
}

/** One decode step's QKV + RoPE + append, f32 pool, with Wqkv in `format`. */
async function qkvCase(c: ModelConfig, format: WeightFormat): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const D = c.hiddenSize;
  const H = c.numHeads;
  const HKV = c.numKvHeads;
  const HD = c.headDim;
  const QD = H * HD;
  const KVD = HKV * HD;
  const rows = QD + 2 * KVD;
  const w = pack(format, bf16(rows * D, Math.sqrt(3 / D), 41 + D), rows, D);
  const pipeline = await cache.get('qkv_rope.wgsl', 'qkv_rope_append', constants(c, format));
  const r = rng(3);
  const x = randomArray(D, 1, r);
  const bias = c.attentionBias ? randomArray(rows, 0.5, r) : new Float32Array(4);
  const pos = 1234;
  const slotsTotal = 64;
  const slots = Uint32Array.from({ length: HKV }, (_, h) => (h * 37 + 11) % slotsTotal);
  const y = referenceMatvec(w, x);
  if (c.attentionBias) addBias(y, bias, rows);
  rope(y, 0, H + HKV, HD, pos, ropeFrequencies(HD, c.ropeTheta));
  const kPool = randomArray(slotsTotal * HD, 1, r);
  const vPool = randomArray(slotsTotal * HD, 1, r);
  const wantK = Float32Array.from(kPool);
  const wantV = Float32Array.from(vPool);
  for (let kh = 0; kh < HKV; kh++) {
    wantK.set(y.subarray(QD + kh * HD, QD + (kh + 1) * HD), slots[kh] * HD);
    wantV.set(y.subarray(QD + KVD + kh * HD, QD + KVD + (kh + 1) * HD), slots[kh] * HD);
  }
  const step = new Uint32Array(4 + HKV);
  step[0] = pos;
  step.set(slots, 4);
  const m = await uploadMatrix(ctx, 'wqkv', w);
  const qb = empty(ctx, QD * 4);
  const kb = upload(ctx, kPool);
  const vb = upload(ctx, vPool);
  dispatch(
    ctx,
    pipeline,
    {
      0: m.parts[0].buffer,
      1: upload(ctx, x),
      2: qb,
      3: kb,
      4: vb,
      5: upload(ctx, ropeTable(c, pos + 1)),
      6: upload(ctx, step),
      7: ctx.uniform('l', [0, 0, 0, 0]),
      9: upload(ctx, bias),
    },
    H + 2 * HKV,
  );
  const want = new Float32Array([...y.subarray(0, QD), ...wantK, ...wantV]);
  const got = new Float32Array([
    ...(await readF32(ctx, qb, QD)),
    ...(await readF32(ctx, kb, kPool.length)),
    ...(await readF32(ctx, vb, vPool.length)),
  ]);
  destroyMatrix(ctx, m);
  return compare(
    `qkv_rope_append ${format} (${c.name}: Wqkv ${rows} x ${D}${c.attentionBias ? ', q/k/v biases' : ''})`,
    want,
    got,
    BOUND,
    t0,
    0.99,
  );
}

export const weightKernelTests: Record<string, () => Promise<CheckResult>> = {
  embed_q4_split: () => embedCase('q4'),
  embed_f16_split: () => embedCase('f16'),
  qkv_rope_append_q4_voxtral: () => qkvCase(voxtral, 'q4'),
  qkv_rope_append_f16_voxtral: () => qkvCase(voxtral, 'f16'),
  qkv_rope_append_q4_omni_bias: () => qkvCase(omni, 'q4'),
};
