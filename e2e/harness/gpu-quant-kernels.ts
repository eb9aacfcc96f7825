/**
 * The weight-format kernels (src/model/quant.ts: f16, q4) against their plain-TS
 * references at the real backbones' shapes: Voxtral's 3072 × 8192 and 8192 × 3072
 * projections, a 32-row prefill, and the lm_head + argmax over 131,072 (Voxtral) and
 * 151,936 (Qwen2.5-Omni, hidden 2048) entries split across several storage bindings.
 * Weights are random with bf16 precision, as a checkpoint holds them, and each q4/f16
 * matvec check reports the quantisation error against them; the q4 lm_heads draw their
 * codes and scales directly (see randomQ4).
 */
import { randomArray, rng } from '../../src/model/testing.js';
import { f16Bits } from '../../src/model/f16.js';
import { argmax } from '../../src/reference/ops.js';
import {
  dequantizeRow,
  pack,
  packF32,
  referenceMatmul,
  referenceMatvec,
  roundBf16,
  rowWords,
  splitRows,
  type PackedMatrix,
  type WeightFormat,
} from '../../src/model/quant.js';
import {
  bindingLimit,
  destroyMatrix,
  uploadMatrix,
  uploadPart,
  type GpuMatrix,
} from '../../src/backend/webgpu/weight-formats.js';
import { loadProductOps } from '../../src/backend/webgpu/product-ops.js';
import { matvecGroups } from '../../src/backend/webgpu/kernels.js';
import { compare, dispatch, empty, gpu, nmse, read, readF32, submit, upload, type CheckResult } from './gpu-util.js';

/** NMSE of a kernel against the TS product of the same dequantised weights. */
const BOUND = 1e-6;

function bf16Weights(n: number, cols: number, seed: number): Float32Array {
  return roundBf16(randomArray(n, Math.sqrt(3 / cols), rng(seed)));
}

// The projections are made once per page and shared by the cases of the same shape
// (drawing and packing 25 M weights costs more than the kernels).
const projections = new Map<string, { w: Float32Array; m: Map<WeightFormat, PackedMatrix> }>();

function projection(format: WeightFormat, rows: number, cols: number): { w: Float32Array; m: PackedMatrix } {
  const key = `${rows}x${cols}`;
  let p = projections.get(key);
  if (!p) projections.set(key, (p = { w: bf16Weights(rows * cols, cols, rows + 2 * cols), m: new Map() }));
  let m = p.m.get(format);
  if (!m) p.m.set(format, (m = pack(format, p.w, rows, cols)));
  return { w: p.w, m };
}

/** The q4 (or f16) weights against the bf16 ones they were made from, and y against the bf16 product. */
function weightError(m: PackedMatrix, w: Float32Array, x: Float32Array, y: Float32Array, xOff: number): string {
  if (m.format === 'f32') return '';
  const row = new Float32Array(m.cols);
  let num = 0;
  let den = 0;
  let worst = 0;
  for (let r = 0; r < m.rows; r++) {
    dequantizeRow(m, r, row);
    for (let g = 0; g < m.cols; g += 32) {
      let gmax = 0;
      let gerr = 0;
      for (let j = g; j < g + 32; j++) {
        const v = w[r * m.cols + j];
        const e = Math.abs(row[j] - v);
        num += e * e;
        den += v * v;
        gmax = Math.max(gmax, Math.abs(v));
        gerr = Math.max(gerr, e);
      }
      if (gmax > 0) worst = Math.max(worst, gerr / gmax);
    }
  }
  const yBf16 = referenceMatvec(packF32(w, m.rows, m.cols), x, xOff);
  return `| ${m.format} vs bf16 weights: nmse=${(num / den).toExponential(2)} max|Δw|/max|w| per group=${worst.toExponential(2)} y nmse vs bf16 product=${nmse(yBf16, y).toExponential(2)}`;
}

async function matvecCase(
  name: string,
  format: WeightFormat,
  rows: number,
  cols: number,
  add: boolean,
  swiglu = false,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const k = await loadProductOps(cache, format);
  const xOff = add ? 8 : 0;
  const all = swiglu ? 2 * rows : rows;
  const { w, m } = projection(format, all, cols);
  const r = rng(7 + rows);
  const x = randomArray(cols + xOff, 1, r);
  const y0 = add ? randomArray(rows, 1, r) : new Float32Array(rows);
  const full = referenceMatvec(m, x, xOff);
  const ref = new Float32Array(rows);
  for (let i = 0; i < rows; i++) {
    if (swiglu) {
      const g = full[i];
      ref[i] = (g / (1 + Math.exp(-g))) * full[rows + i];
    } else ref[i] = y0[i] + full[i];
  }
  const gm = await uploadMatrix(ctx, name, m);
  const yb = upload(ctx, y0);
  const xb = upload(ctx, x);
  const g0 = performance.now();
  if (swiglu) {
    // [gate; up] in one binding, y of `rows` entries.
    dispatch(
      ctx,
      k.matvecSwiglu,
      [gm.parts[0].buffer, xb, yb, ctx.uniform('p', [rows, cols, 1, xOff])],
      ...matvecGroups(rows),
    );
  } else {
    submit(ctx, ...(add ? k.matvecAdd : k.matvec).run({ w: gm, x: xb, y: yb }, (l, v) => ctx.uniform(l, v), xOff));
  }
  const got = await readF32(ctx, yb, rows);
  const gpuMs = performance.now() - g0;
  const err = swiglu ? '' : weightError(m, w, x, full, xOff);
  return compare(name, ref, got, BOUND, t0, 0.5, `${format} [${all}, ${cols}] gpu ${Math.round(gpuMs)} ms ${err}`);
}

async function matmulCase(
  name: string,
  format: WeightFormat,
  rows: number,
  cols: number,
  n: number,
  add: boolean,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const k = await loadProductOps(cache, format);
  const { m } = projection(format, rows, cols);
  const r = rng(n + rows);
  const x = randomArray(n * cols, 1, r);
  const y0 = add ? randomArray(n * rows, 1, r) : new Float32Array(n * rows);
  const ref = referenceMatmul(m, x, n);
  for (let i = 0; i < ref.length; i++) ref[i] += y0[i];
  const gm = await uploadMatrix(ctx, name, m);
  const yb = upload(ctx, y0);
  const d = (add ? k.matmulAdd : k.matmul).run({ w: gm, x: upload(ctx, x), y: yb }, n, (l, v) => ctx.uniform(l, v));
  const g0 = performance.now();
  submit(ctx, d);
  const got = await readF32(ctx, yb, n * rows);
  const gpuMs = performance.now() - g0;
  return compare(
    name,
    ref,
    got,
    BOUND,
    t0,
    0.5,
    `${format} [${rows}, ${cols}] x ${n} rows gpu ${Math.round(gpuMs)} ms`,
  );
}

/**
 * Random q4 rows drawn as codes and scales directly, of the magnitude quantised
 * 1/sqrt(cols)-scaled weights have: a 131,072 × 3072 lm_head is 403 M weights, and
 * drawing and quantising them in f32 would take most of a minute in the page (the
 * quantiser runs on the 25 M-weight projections above).
 */
function randomQ4(rows: number, cols: number, seed: number): PackedMatrix {
  const r = rng(seed);
  const stride = rowWords('q4', cols);
  const data = new Uint32Array(rows * stride);
  const s0 = Math.sqrt(3 / cols) / 8;
  for (let i = 0; i < rows; i++) {
    const b = i * stride;
    for (let j = 0; j < cols / 8; j++) data[b + j] = (r() * 4294967296) >>> 0;
    for (let g = 0; g < cols / 32; g++) {
      const scale = s0 * (0.5 + r()) * (r() < 0.5 ? -1 : 1);
      data[b + cols / 8 + (g >> 1)] |= f16Bits(scale) << (16 * (g & 1));
    }
  }
  return { format: 'q4', rows, cols, data };
}

/** A row whose product with x beats every random row: +-0.05 by the sign of x, in `format`. */
function winningRow(format: WeightFormat, x: Float32Array): PackedMatrix {
  return pack(format, roundBf16(Float32Array.from(x, (v) => (v > 0 ? 0.05 : -0.05))), 1, x.length);
}

/**
 * lm_head + argmax over a vocabulary split across bindings of at most `cap` bytes: each
 * part's matvec writes its slice of one logits buffer, then one argmax reads them all.
 * Parts are made and uploaded one at a time (the f32 matrix would be 1.6 GB). Two
 * identical rows planted in different parts make the maximum a tie: the lower index must
 * win. A second argmax with those two masked checks the order of the random logits.
 */
async function lmHeadCase(
  name: string,
  format: WeightFormat,
  vocab: number,
  hidden: number,
  cap: number,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const k = await loadProductOps(cache, format);
  const argmaxPipe = await cache.get('argmax.wgsl', 'argmax', { VOCAB: vocab });
  const maxBytes = bindingLimit(ctx, cap);
  const plan = splitRows(format, vocab, hidden, maxBytes);
  if (plan.length < 2)
    return {
      name,
      pass: false,
      ms: 0,
      detail: `the ${format} lm_head fits one binding of ${maxBytes} bytes: the split is not exercised`,
    };
  const x = randomArray(hidden, 1, rng(vocab));
  const lowWin = plan[1].row0 + 5;
  const highWin = vocab - 1;
  const win = winningRow(format, x).data;
  const ref = new Float32Array(vocab);
  const stride = rowWords(format, hidden);
  const parts = [];
  for (const [i, p] of plan.entries()) {
    const m =
      format === 'q4'
        ? randomQ4(p.rows, hidden, p.row0 + 1)
        : pack(format, bf16Weights(p.rows * hidden, hidden, p.row0 + 1), p.rows, hidden);
    for (const t of [lowWin, highWin]) if (t >= p.row0 && t < p.row0 + p.rows) m.data.set(win, (t - p.row0) * stride);
    referenceMatvec(m, x, 0, ref.subarray(p.row0, p.row0 + p.rows));
    parts.push(uploadPart(ctx, `${name}[${i}]`, p, m.data));
  }
  const gm: GpuMatrix = { name, format, rows: vocab, cols: hidden, parts, bytes: vocab * stride * 4 };
  const logits = empty(ctx, vocab * 4);
  const xb = upload(ctx, x);
  const tok = empty(ctx, 16);
  const g0 = performance.now();
  submit(ctx, ...k.matvec.run({ w: gm, x: xb, y: logits }, (l, v) => ctx.uniform(l, v)));
  dispatch(ctx, argmaxPipe, [logits, tok], 1);
  const gotTie = new Uint32Array(await read(ctx, tok, 4))[0];
  const gpuMs = performance.now() - g0;
  const got = await readF32(ctx, logits, vocab);
  // Mask the planted pair on both sides: the random logits decide.
  const minus = new Float32Array([-3e38]);
  ctx.device.queue.writeBuffer(logits, lowWin * 4, minus);
  ctx.device.queue.writeBuffer(logits, highWin * 4, minus);
  dispatch(ctx, argmaxPipe, [logits, tok], 1);
  const gotRandom = new Uint32Array(await read(ctx, tok, 4))[0];
  destroyMatrix(ctx, gm); // up to 226 MB, host memory on SwiftShader
  const masked = ref.slice();
  masked[lowWin] = masked[highWin] = -3e38;
  const wantTie = argmax(ref);
  const wantRandom = argmax(masked);
  const res = compare(
    name,
    ref,
    got,
    BOUND,
    t0,
    0.5,
    `${format} [${vocab}, ${hidden}] in ${plan.length} bindings of <= ${maxBytes} bytes; argmax tie want ${wantTie} got ${gotTie}, random want ${wantRandom} got ${gotRandom}; gpu ${Math.round(gpuMs)} ms`,
  );
  res.pass &&= wantTie === lowWin && gotTie === wantTie && gotRandom === wantRandom;
  return res;
}

const MiB = 2 ** 20;

export const quantTests: Record<string, () => Promise<CheckResult>> = {
  matvec_q4_3072x8192: () => matvecCase('matvec_q4_3072x8192', 'q4', 3072, 8192, true),
  matvec_q4_8192x3072: () => matvecCase('matvec_q4_8192x3072', 'q4', 8192, 3072, false),
  matvec_f16_3072x8192: () => matvecCase('matvec_f16_3072x8192', 'f16', 3072, 8192, true),
  matvec_f16_8192x3072: () => matvecCase('matvec_f16_8192x3072', 'f16', 8192, 3072, false),
  matvec_swiglu_q4: () => matvecCase('matvec_swiglu_q4', 'q4', 4096, 3072, false, true),
  matmul_q4_32x3072to8192: () => matmulCase('matmul_q4_32x3072to8192', 'q4', 8192, 3072, 32, false),
  matmul_add_q4_35x8192to3072: () => matmulCase('matmul_add_q4_35x8192to3072', 'q4', 3072, 8192, 35, true),
  // K = 416: 13 groups, the scale words padded to a vec4 (every real K is a multiple of 256).
  matvec_q4_padded: () => matvecCase('matvec_q4_padded', 'q4', 1000, 416, true),
  matmul_q4_padded: () => matmulCase('matmul_q4_padded', 'q4', 1000, 416, 37, false),
  matmul_f16_32x3072to8192: () => matmulCase('matmul_f16_32x3072to8192', 'f16', 8192, 3072, 32, false),
  lm_head_argmax_q4_131072: () => lmHeadCase('lm_head_argmax_q4_131072', 'q4', 131_072, 3072, 64 * MiB),
  lm_head_argmax_q4_151936: () => lmHeadCase('lm_head_argmax_q4_151936', 'q4', 151_936, 2048, 64 * MiB),
  lm_head_argmax_f16_split: () => lmHeadCase('lm_head_argmax_f16_split', 'f16', 8192, 3072, 16 * MiB),
};
