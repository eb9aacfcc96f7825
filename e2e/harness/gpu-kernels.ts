/**
 * Dense kernels against their TS references (src/reference/ops.ts), at the reference
 * model's shapes: matvec (with the fused residual add), matvec+SwiGLU, tiled matmul,
 * RMSNorm, SwiGLU, the prompt embedding with audio placement, argmax; the f16 and q4
 * weight formats' products at the real backbones' shapes are in gpu-quant-kernels.ts.
 */
import { referenceConfig, randomArray, rng } from '../../src/model/testing.js';
import { segmentLength } from '../../src/model/config.js';
import type { KvPrecision } from '../../src/kv/precision.js';
import { Kernels, grid, matmulGroups, matvecGroups } from '../../src/backend/webgpu/kernels.js';
import { argmax, matmul, matvec, rmsnorm, swiglu } from '../../src/reference/ops.js';
import { compare, dispatch, empty, gpu, readF32, read, upload, type CheckResult } from './gpu-util.js';
import { quantTests } from './gpu-quant-kernels.js';

export const config = referenceConfig();
const F32_BOUND = 1e-7;
/** Prompt-sized row counts: > 1,000 rows and not a multiple of the 16-row tile. */
const ROWS = 1027;

const kernels = new Map<KvPrecision, Promise<Kernels>>();
/** The kernels for a pool of this precision (the dense ones are the same for both). */
export async function loadKernels(kv: KvPrecision = 'f32'): Promise<Kernels> {
  const { cache } = await gpu();
  if (!kernels.has(kv)) kernels.set(kv, Kernels.load(cache, config, segmentLength(config), undefined, kv));
  return kernels.get(kv)!;
}

async function matvecTest(name: string, rows: number, cols: number, add: boolean): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const r = rng(11 + rows);
  const w = randomArray(rows * cols, Math.sqrt(3 / cols), r);
  const x = randomArray(cols + 8, 1, r);
  const y0 = add ? randomArray(rows, 1, r) : new Float32Array(rows);
  const ref = new Float32Array(rows);
  matvec(w, rows, cols, x, ref, 8);
  if (add) for (let i = 0; i < rows; i++) ref[i] += y0[i];
  const yb = upload(ctx, y0);
  const [gx, gy] = matvecGroups(rows);
  dispatch(
    ctx,
    add ? k.products.matvecAdd : k.products.matvec,
    [upload(ctx, w), upload(ctx, x), yb, ctx.uniform('p', [rows, cols, 1, 8])],
    gx,
    gy,
  );
  return compare(name, ref, await readF32(ctx, yb, rows), F32_BOUND, t0);
}

async function matvecSwigluTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const I = config.intermediateSize;
  const D = config.hiddenSize;
  const r = rng(5);
  const w = randomArray(2 * I * D, Math.sqrt(3 / D), r);
  const x = randomArray(D, 1, r);
  const g = new Float32Array(I);
  const u = new Float32Array(I);
  matvec(w.subarray(0, I * D), I, D, x, g);
  matvec(w.subarray(I * D), I, D, x, u);
  const ref = new Float32Array(I);
  swiglu(g, u, ref);
  const yb = empty(ctx, I * 4);
  dispatch(
    ctx,
    k.products.matvecSwiglu,
    [upload(ctx, w), upload(ctx, x), yb, ctx.uniform('p', [I, D, 1, 0])],
    ...matvecGroups(I),
  );
  return compare('matvec_swiglu', ref, await readF32(ctx, yb, I), F32_BOUND, t0);
}

async function matmulTest(name: string, rows: number, cols: number, add: boolean): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const r = rng(rows + cols);
  const n = ROWS;
  const w = randomArray(rows * cols, Math.sqrt(3 / cols), r);
  const x = randomArray(n * cols, 1, r);
  const y0 = add ? randomArray(n * rows, 1, r) : new Float32Array(n * rows);
  const ref = new Float32Array(n * rows);
  matmul(w, rows, cols, x, n, ref);
  if (add) for (let i = 0; i < ref.length; i++) ref[i] += y0[i];
  const yb = upload(ctx, y0);
  dispatch(
    ctx,
    add ? k.products.matmulAdd : k.products.matmul,
    [upload(ctx, w), upload(ctx, x), yb, ctx.uniform('p', [rows, cols, n, 0])],
    ...matmulGroups(rows, n),
  );
  return compare(name, ref, await readF32(ctx, yb, n * rows), F32_BOUND, t0);
}

async function rmsnormTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const D = config.hiddenSize;
  const r = rng(3);
  const x = randomArray(ROWS * D, 2, r);
  const w = randomArray(D, 0.1, r).map((v) => v + 1);
  const ref = new Float32Array(ROWS * D);
  rmsnorm(x, w, config.rmsNormEps, D, ROWS, ref);
  const yb = empty(ctx, ROWS * D * 4);
  const xb = upload(ctx, x);
  const wb = upload(ctx, w);
  dispatch(ctx, k.rmsnorm, [xb, wb, yb, ctx.uniform('p', [ROWS, 0, 0, 0])], Math.ceil(ROWS / 64));
  const all = await readF32(ctx, yb, ROWS * D);
  // The final norm reads only the last prompt row into row 0.
  const lb = empty(ctx, D * 4);
  dispatch(ctx, k.rmsnorm, [xb, wb, lb, ctx.uniform('p', [1, ROWS - 1, 0, 0])], 1);
  const last = await readF32(ctx, lb, D);
  const got = new Float32Array(ROWS * D + D);
  got.set(all);
  got.set(last, ROWS * D);
  const want = new Float32Array(ROWS * D + D);
  want.set(ref);
  want.set(ref.subarray((ROWS - 1) * D), ROWS * D);
  return compare('rmsnorm', want, got, F32_BOUND, t0);
}

async function swigluTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const I = config.intermediateSize;
  const r = rng(9);
  const gu = randomArray(ROWS * 2 * I, 4, r);
  const ref = new Float32Array(ROWS * I);
  const g = new Float32Array(I);
  const u = new Float32Array(I);
  const o = new Float32Array(I);
  for (let i = 0; i < ROWS; i++) {
    g.set(gu.subarray(i * 2 * I, i * 2 * I + I));
    u.set(gu.subarray(i * 2 * I + I, (i + 1) * 2 * I));
    swiglu(g, u, o);
    ref.set(o, i * I);
  }
  const ob = empty(ctx, ROWS * I * 4);
  const [gx, gy] = grid(Math.ceil((ROWS * I) / 64));
  dispatch(ctx, k.swiglu, [upload(ctx, gu), ob, ctx.uniform('p', [ROWS, 0, 0, 0])], gx, gy);
  return compare('swiglu', ref, await readF32(ctx, ob, ROWS * I), F32_BOUND, t0);
}

async function embedTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const D = config.hiddenSize;
  // 88 minutes of audio: more rows than one grid dimension's 65,535 workgroups.
  const A = 66_000;
  const r = rng(4);
  const table = randomArray(config.vocabSize * D, 1, r);
  const audio = randomArray(A * D, 1, r);
  const ids = [config.tokens.bos, ...Array.from({ length: A }, (_, i) => -1 - i), ...config.instruction];
  const n = ids.length;
  const ref = new Float32Array(n * D);
  ids.forEach((id, i) =>
    ref.set(id >= 0 ? table.subarray(id * D, (id + 1) * D) : audio.subarray((-1 - id) * D, -id * D), i * D),
  );
  // The prefill writes audio rows into x first; token rows hold stale values the pass must overwrite.
  const x0 = randomArray(n * D, 100, r);
  x0.set(audio, D);
  const xb = upload(ctx, x0);
  dispatch(
    ctx,
    k.embed,
    [upload(ctx, table), upload(ctx, Int32Array.from(ids)), xb, ctx.uniform('p', [n, 0, 0, 0])],
    ...grid(n),
  );
  return compare('embed', ref, await readF32(ctx, xb, n * D), 0, t0, 0.99);
}

async function argmaxTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const V = config.vocabSize;
  const r = rng(8);
  const cases: Float32Array[] = [];
  for (let c = 0; c < 4; c++) cases.push(randomArray(V, 10, r));
  // Ties: the lowest index must win, as in ops.argmax.
  const tie = new Float32Array(V).fill(-1);
  tie[V - 3] = 5;
  tie[17] = 5;
  tie[300 % V] = 5;
  cases.push(tie, new Float32Array(V).fill(-7));
  const want: number[] = [];
  const got: number[] = [];
  for (const logits of cases) {
    const tb = empty(ctx, 16);
    dispatch(ctx, k.argmax, [upload(ctx, logits), tb], 1);
    got.push(new Uint32Array(await read(ctx, tb, 4))[0]);
    want.push(argmax(logits));
  }
  const pass = want.every((w, i) => w === got[i]);
  return { name: 'argmax', pass, ms: performance.now() - t0, detail: `want ${want.join(',')} got ${got.join(',')}` };
}

const D = config.hiddenSize;
const QD = config.numHeads * config.headDim;
const KVD = config.numKvHeads * config.headDim;

export const denseTests: Record<string, () => Promise<CheckResult>> = {
  matvec_lm_head: () => matvecTest('matvec_lm_head', config.vocabSize, D, false),
  matvec_add_o_proj: () => matvecTest('matvec_add_o_proj', D, QD, true),
  matvec_add_down: () => matvecTest('matvec_add_down', D, config.intermediateSize, true),
  matvec_swiglu: matvecSwigluTest,
  matmul_qkv: () => matmulTest('matmul_qkv', QD + 2 * KVD, D, false),
  matmul_add_down: () => matmulTest('matmul_add_down', D, config.intermediateSize, true),
  rmsnorm: rmsnormTest,
  swiglu: swigluTest,
  embed: embedTest,
  argmax: argmaxTest,
  ...quantTests,
};
