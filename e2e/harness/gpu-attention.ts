/**
 * RoPE, KV append, gather and both attentions against ops.ts at shipped scale:
 * > 4,000 positions, a paged pool built by the real Residency (per-head subsets that
 * differ, releases and recalls that leave EMPTY slots and non-contiguous page tables,
 * text pages interleaved), split-K boundaries, exported weights. The kernels that touch
 * the pool or the prefill K/V (which hold the pool's precision) run with f32 and with f16
 * storage (two halves per u32 word): f16 is checked against the same references on
 * f16-rounded values, bit for bit against the CPU's rounding (kv/precision.ts), which the
 * CPU backend mirrors, where a kernel only stores or copies.
 */
import { groupSize, kvHeadCount, segmentLength } from '../../src/model/config.js';
import { randomArray, rng } from '../../src/model/testing.js';
import { addBias, causalAttention, matvec, pagedAttention, rope, ropeFrequencies } from '../../src/reference/ops.js';
import { Residency, type PageStorage } from '../../src/kv/residency.js';
import { appendPositions } from '../../src/reference/append-positions.js';
import { Kernels, grid, ropeTable } from '../../src/backend/webgpu/kernels.js';
import { NO_EXPORT, buildTables } from '../../src/backend/webgpu/pool.js';
import type { PrefillPlan } from '../../src/kv/plan.js';
import { segmentSummaries } from '../../src/policy/wnw/summaries.js';
import { f16Value } from '../../src/model/f16.js';
import { packF16, roundF16, type KvPrecision } from '../../src/kv/precision.js';
import { config, loadKernels } from './gpu-kernels.js';
import { compare, dispatch, empty, gpu, nonZero, read, readF32, upload, type CheckResult } from './gpu-util.js';

const ATTN_BOUND = 5e-4;
const F32_BOUND = 1e-7;
const c = config;
const HD = c.headDim;
const H = c.numHeads;
const HKV = c.numKvHeads;
const G = groupSize(c);
const QD = H * HD;
const KVD = HKV * HD;
const LONG = 4100;

/** What a pool of this precision holds for these values (f16: each rounded). */
function stored(values: Float32Array, kv: KvPrecision): Float32Array {
  if (kv === 'f32') return values;
  const out = new Float32Array(values.length);
  roundF16(values, values.length, out);
  return out;
}

/** A pool buffer in the kernels' format: f32 as is, f16 as packed halves. */
function poolBuffer(ctx: Parameters<typeof upload>[0], values: Float32Array, kv: KvPrecision): GPUBuffer {
  return upload(ctx, kv === 'f16' ? packF16(values, values.length) : values);
}

async function readPool(
  ctx: Parameters<typeof upload>[0],
  buf: GPUBuffer,
  n: number,
  kv: KvPrecision,
): Promise<Float32Array> {
  if (kv === 'f32') return readF32(ctx, buf, n);
  return Float32Array.from(new Uint16Array(await read(ctx, buf, n * 2)), f16Value);
}

/** The kernels of the test config, or of the same shapes with q/k/v biases (Qwen2 family). */
async function kernelsFor(kv: KvPrecision, bias: boolean): Promise<Kernels> {
  if (!bias) return loadKernels(kv);
  const { cache } = await gpu();
  const cb = { ...c, attentionBias: true };
  return Kernels.load(cache, cb, segmentLength(cb), undefined, kv);
}

/** Random q/k/v biases [QD + 2 KVD] for the bias variants; a placeholder the kernel never reads otherwise. */
function biasFor(bias: boolean, seed: number): Float32Array {
  return bias ? randomArray(QD + 2 * KVD, 0.5, rng(seed)) : new Float32Array(4);
}

async function ropeSplitTest(kv: KvPrecision, bias = false): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await kernelsFor(kv, bias);
  const n = LONG;
  const stride = QD + 2 * KVD;
  const qkv = randomArray(n * stride, 1, rng(21));
  const b = biasFor(bias, 22);
  const freqs = ropeFrequencies(HD, c.ropeTheta);
  const q = new Float32Array(n * QD);
  const kk = new Float32Array(n * KVD);
  const v = new Float32Array(n * KVD);
  for (let i = 0; i < n; i++) {
    q.set(qkv.subarray(i * stride, i * stride + QD), i * QD);
    kk.set(qkv.subarray(i * stride + QD, i * stride + QD + KVD), i * KVD);
    v.set(qkv.subarray(i * stride + QD + KVD, (i + 1) * stride), i * KVD);
    if (bias) {
      addBias(q.subarray(i * QD, (i + 1) * QD), b.subarray(0, QD), QD);
      addBias(kk.subarray(i * KVD, (i + 1) * KVD), b.subarray(QD, QD + KVD), KVD);
      addBias(v.subarray(i * KVD, (i + 1) * KVD), b.subarray(QD + KVD), KVD);
    }
    rope(q, i * QD, H, HD, i, freqs);
    rope(kk, i * KVD, HKV, HD, i, freqs);
  }
  const eb = kv === 'f16' ? 2 : 4;
  const qb = empty(ctx, n * QD * 4);
  const kb = empty(ctx, n * KVD * eb);
  const vb = empty(ctx, n * KVD * eb);
  dispatch(
    ctx,
    k.ropeSplit,
    {
      1: upload(ctx, qkv),
      2: qb,
      3: kb,
      4: vb,
      5: upload(ctx, ropeTable(c, n)),
      8: ctx.uniform('p', [n, 0, 0, 0]),
      9: upload(ctx, b),
    },
    n,
  );
  const want = new Float32Array([...q, ...stored(kk, kv), ...stored(v, kv)]);
  const got = new Float32Array([
    ...(await readF32(ctx, qb, n * QD)),
    ...(await readPool(ctx, kb, n * KVD, kv)),
    ...(await readPool(ctx, vb, n * KVD, kv)),
  ]);
  const res = compare(`rope_split (${kv} K/V${bias ? ', q/k/v biases' : ''})`, want, got, F32_BOUND, t0, 0.99);
  if (kv === 'f32') return res;
  // V is only rounded: bit for bit the CPU's f16 of the same sums. K may differ from it where a
  // rotation's last f32 bit falls on an f16 rounding boundary, one f16 step at most.
  const vWant = stored(v, kv);
  const vOff = vWant.findIndex((x, i) => x !== got[n * (QD + KVD) + i]);
  return {
    ...res,
    pass: res.pass && vOff < 0,
    detail: `${res.detail}; V ${vOff < 0 ? 'bit for bit' : `differs at ${vOff}`}`,
  };
}

async function qkvAppendTest(kv: KvPrecision, bias = false): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await kernelsFor(kv, bias);
  const D = c.hiddenSize;
  const rows = QD + 2 * KVD;
  const r = rng(31);
  const w = randomArray(rows * D, Math.sqrt(3 / D), r);
  const x = randomArray(D, 1, r);
  const pos = 4321;
  const layer = 3;
  const heads = kvHeadCount(c);
  const slotsTotal = 64 * 25;
  const slots = new Uint32Array(heads);
  for (let h = 0; h < heads; h++) slots[h] = (h * 37 + 11) % slotsTotal;
  const b = biasFor(bias, 32);
  const y = new Float32Array(rows);
  matvec(w, rows, D, x, y);
  if (bias) addBias(y, b, rows);
  const freqs = ropeFrequencies(HD, c.ropeTheta);
  rope(y, 0, H + HKV, HD, pos, freqs);
  const kPool = stored(randomArray(slotsTotal * HD, 1, r), kv);
  const vPool = stored(randomArray(slotsTotal * HD, 1, r), kv);
  const wantK = Float32Array.from(kPool);
  const wantV = Float32Array.from(vPool);
  for (let kh = 0; kh < HKV; kh++) {
    const s = slots[layer * HKV + kh];
    wantK.set(stored(y.slice(QD + kh * HD, QD + (kh + 1) * HD), kv), s * HD);
    wantV.set(stored(y.slice(QD + KVD + kh * HD, QD + KVD + (kh + 1) * HD), kv), s * HD);
  }
  const step = new Uint32Array(4 + heads);
  step[0] = pos;
  step.set(slots, 4);
  const qb = empty(ctx, QD * 4);
  const kb = poolBuffer(ctx, kPool, kv);
  const vb = poolBuffer(ctx, vPool, kv);
  dispatch(
    ctx,
    k.qkvRopeAppend,
    {
      0: upload(ctx, w),
      1: upload(ctx, x),
      2: qb,
      3: kb,
      4: vb,
      5: upload(ctx, ropeTable(c, pos + 1)),
      6: upload(ctx, step),
      7: ctx.uniform('l', [layer, 0, 0, 0]),
      9: upload(ctx, b),
    },
    H + 2 * HKV,
  );
  const want = new Float32Array([...y.subarray(0, QD), ...wantK, ...wantV]);
  const got = new Float32Array([
    ...(await readF32(ctx, qb, QD)),
    ...(await readPool(ctx, kb, kPool.length, kv)),
    ...(await readPool(ctx, vb, vPool.length, kv)),
  ]);
  return compare(`qkv_rope_append (${kv} pool${bias ? ', q/k/v biases' : ''})`, want, got, F32_BOUND, t0, 0.99);
}

/** CPU page storage that records what the residency writes. */
class Capture implements PageStorage {
  constructor(
    readonly k: Float32Array,
    readonly v: Float32Array,
  ) {}
  writeRows(slot: number, count: number, k: Float32Array, v: Float32Array): void {
    this.k.set(k.subarray(0, count * HD), slot * HD);
    this.v.set(v.subarray(0, count * HD), slot * HD);
  }
  syncPositions(): void {}
}

/**
 * A pool as WnW leaves it mid-decode: every head keeps a different random subset of
 * LONG audio positions, then releases some and recalls others, and text tokens are
 * appended in between, so page tables interleave and contain EMPTY slots; one head per
 * layer holds summary slots of what it dropped (kv/summary.ts).
 */
export function buildPool(A: number, seed: number, layers: number[]) {
  const r = rng(seed);
  const heads = kvHeadCount(c);
  const P = segmentLength(c);
  const numPages = heads * (Math.ceil(A / P) + 60);
  const store = new Capture(new Float32Array(numPages * P * HD), new Float32Array(numPages * P * HD));
  const res = new Residency({ heads, headDim: HD, pageSize: P, numPages, audioStart: 1, audioLength: A }, store);
  const plan: PrefillPlan = { heads: [] };
  const all = Int32Array.from({ length: A }, (_, i) => i);
  for (let h = 0; h < heads; h++) {
    const on = layers.includes(Math.floor(h / HKV));
    const keep = h % HKV === 0 ? 1 : 0.55 + 0.45 * r(); // one head per layer keeps every position
    const gpu = on ? all.filter(() => r() < keep) : new Int32Array(0);
    // One head per layer drops what it does not keep, into summary slots of 5 positions at most.
    const summarized = on && h % HKV === 1;
    plan.heads.push({
      gpu,
      cpu: on && !summarized ? all : new Int32Array(0),
      summaries: summarized ? segmentSummaries(gpu, A, P, 5) : undefined,
    });
  }
  const text = [0, A + 1, A + 2, A + 3];
  const source = (_h: number, _p: number, k: Float32Array, ko: number, v: Float32Array, vo: number) => {
    for (let d = 0; d < HD; d++) {
      k[ko + d] = r() * 2 - 1;
      v[vo + d] = r() * 2 - 1;
    }
  };
  const { gathers } = res.applyPrefill(plan, text, source);
  const slotsOut = new Int32Array(heads);
  let pos = A + 4;
  for (let round = 0; round < 6; round++) {
    for (let t = 0; t < 9; t++) res.appendText(pos++, slotsOut);
    const release = [];
    const recall = [];
    for (const l of layers) {
      for (let kh = 0; kh < HKV; kh++) {
        const h = l * HKV + kh;
        const a0 = Math.floor(r() * (A - 200));
        release.push({ head: h, positions: Int32Array.from({ length: 60 + kh * 10 }, (_, i) => a0 + i * 2) });
        const b0 = Math.floor(r() * (A - 100));
        if (kh !== 1) recall.push({ head: h, positions: Int32Array.from({ length: 25 + 13 * kh }, (_, i) => b0 + i) });
      }
    }
    res.apply({ release, recall });
  }
  // Every slot gets random K/V (free and EMPTY slots too: the kernels must skip them).
  const fill = (a: Float32Array) => {
    for (let i = 0; i < a.length; i++) if (a[i] === 0) a[i] = r() * 2 - 1;
  };
  fill(store.k);
  fill(store.v);
  return { res, store, gathers, numPages, pageSize: P, nextPos: pos };
}

async function pagedDecodeTest(kv: KvPrecision): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const kn = await loadKernels(kv);
  const A = LONG;
  const layers = [0, c.numLayers - 1]; // first and last layer: tables of two layers interleave in one pool
  const { res, store, numPages, pageSize: P } = buildPool(A, 41, layers);
  const heads = kvHeadCount(c);
  const exportIndex = new Uint32Array(heads).fill(NO_EXPORT);
  const exported: number[] = [];
  for (const l of layers)
    for (let kh = 0; kh < HKV; kh++) {
      exportIndex[l * HKV + kh] = exported.length;
      exported.push(l * HKV + kh);
    }
  const tables = buildTables(res, heads, exportIndex);
  let maxPages = 0;
  const distinct = new Set<string>();
  for (let h = 0; h < heads; h++) {
    maxPages = Math.max(maxPages, res.pageTable(h).length);
    distinct.add(res.pageTable(h).join(','));
  }
  const pps = kn.pagesPerSplit;
  const splits = Math.ceil(maxPages / pps);
  const sk = stored(store.k, kv);
  const sv = stored(store.v, kv);
  const kb = poolBuffer(ctx, sk, kv);
  const vb = poolBuffer(ctx, sv, kv);
  const posb = upload(ctx, res.positions);
  const tb = upload(ctx, tables);
  const scores = empty(ctx, numPages * P * G * 4);
  const partials = empty(ctx, splits * H * (HD + 2) * 4);
  const ml = empty(ctx, c.numLayers * H * 2 * 4);
  const weights = empty(ctx, exported.length * A * 4);
  const r = rng(43);
  const want: number[] = [];
  const got: number[] = [];
  const wantW = exported.map(() => new Float32Array(A));
  for (const l of layers) {
    const q = randomArray(QD, 4, r);
    const out = new Float32Array(QD);
    for (let kh = 0; kh < HKV; kh++) {
      const h = l * HKV + kh;
      const pages = res.pageTable(h);
      pagedAttention(
        q,
        kh * G * HD,
        G,
        HD,
        { pages, pageCount: pages.length },
        P,
        sk,
        sv,
        res.positions,
        out,
        kh * G * HD,
        wantW[exportIndex[h]],
        1,
      );
    }
    const qb = upload(ctx, q);
    const attn = empty(ctx, QD * 4);
    const lu = ctx.uniform('layer', [l, 0, 0, 0]);
    dispatch(ctx, kn.attnSplit, [qb, kb, vb, posb, tb, scores, partials, lu], HKV, splits);
    dispatch(ctx, kn.attnReduce, { 4: tb, 6: partials, 7: lu, 8: attn, 9: ml }, H);
    want.push(...out);
    got.push(...(await readF32(ctx, attn, QD)));
  }
  ctx.device.queue.writeBuffer(weights, 0, new Float32Array(exported.length * A));
  dispatch(
    ctx,
    kn.attnExport,
    { 3: posb, 4: tb, 5: scores, 10: weights, 11: ctx.uniform('e', [heads, 1, A, 0]), 12: ml },
    exported.length,
  );
  const gotW = await readF32(ctx, weights, exported.length * A);
  const wantWAll = new Float32Array(exported.length * A);
  wantW.forEach((w, i) => wantWAll.set(w, i * A));
  const attnRes = compare(`paged_decode_attention (${kv} pool)`, want, got, ATTN_BOUND, t0, 0.99);
  const wRes = compare('weights', wantWAll, gotW, ATTN_BOUND, t0, 0.3);
  const shape = `pages/head max ${maxPages}, ${splits} splits of ${pps} pages, ${distinct.size} distinct tables, gpu positions/head ${Array.from(
    res.stats().gpuPerHead,
  )
    .filter((x) => x > 0)
    .join(',')}, ${res.positions.filter((e) => e < -1).length} summary slots`;
  return {
    ...attnRes,
    pass: attnRes.pass && wRes.pass,
    detail: `out: ${attnRes.detail}; exported weights: ${wRes.detail}; ${shape}`,
  };
}

async function gatherTest(kv: KvPrecision): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const kn = await loadKernels(kv);
  const A = LONG;
  const n = A + 4;
  const layer = c.numLayers - 1;
  const { res, gathers, numPages, pageSize: P } = buildPool(A, 51, [layer]);
  const r = rng(52);
  // The prefill K/V hold the pool's precision: an f16 pool gathers from f16 rows.
  const srcK = stored(randomArray(n * KVD, 1, r), kv);
  const srcV = stored(randomArray(n * KVD, 1, r), kv);
  const entries: number[] = [];
  const wantK = new Float32Array(numPages * P * HD);
  const wantV = new Float32Array(numPages * P * HD);
  for (const g of gathers) {
    if (Math.floor(g.head / HKV) !== layer) continue;
    const kh = g.head % HKV;
    for (let i = 0; i < g.slots.length; i++) {
      entries.push(g.slots[i], g.seqPositions[i], kh);
      const o = g.seqPositions[i] * KVD + kh * HD;
      wantK.set(srcK.subarray(o, o + HD), g.slots[i] * HD);
      wantV.set(srcV.subarray(o, o + HD), g.slots[i] * HD);
    }
  }
  const count = entries.length / 3;
  const eb = kv === 'f16' ? 2 : 4;
  const kb = empty(ctx, wantK.length * eb);
  const vb = empty(ctx, wantV.length * eb);
  const [gx, gy] = grid(Math.ceil((count * HD) / 64));
  dispatch(
    ctx,
    kn.gather,
    [
      upload(ctx, Uint32Array.from(entries)),
      poolBuffer(ctx, srcK, kv),
      poolBuffer(ctx, srcV, kv),
      kb,
      vb,
      ctx.uniform('p', [0, count, 0, 0]),
    ],
    gx,
    gy,
  );
  // Bound 0: a gather copies the rows' words, which are exactly the CPU's values.
  const want = new Float32Array([...wantK, ...wantV]);
  const got = new Float32Array([
    ...(await readPool(ctx, kb, wantK.length, kv)),
    ...(await readPool(ctx, vb, wantV.length, kv)),
  ]);
  void res;
  return compare(`kv_gather (${kv} pool)`, want, got, 0, t0, 0.99 * nonZero(want), `${count} rows`);
}

/**
 * Causal attention over LONG prompt positions for one KV group (its GROUP query heads;
 * the grid's head offset selects them), plus the prefill scores for a SnapKV-style
 * window of 32 query rows and for every row (prefillQueries = Infinity); then the same
 * in two blocks of rows, as the prefill runs a long prompt (each block binds only its
 * queries and output rows, and adds its share of the scores).
 */
async function causalTest(kv: KvPrecision): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const kn = await loadKernels(kv);
  const n = LONG;
  const A = n - 4;
  const kh = HKV - 1;
  const r = rng(61);
  const q = randomArray(n * QD, 2, r);
  // K/V as the prefill holds them for a pool of this precision (f16: the reference reads the same rounded values).
  const k = stored(randomArray(n * KVD, 1, r), kv);
  const v = stored(randomArray(n * KVD, 1, r), kv);
  // Reference on the selected group only: slices as a 1-KV-head model.
  const qs = new Float32Array(n * G * HD);
  const ks = new Float32Array(n * HD);
  const vs = new Float32Array(n * HD);
  for (let i = 0; i < n; i++) {
    qs.set(q.subarray(i * QD + kh * G * HD, i * QD + (kh + 1) * G * HD), i * G * HD);
    ks.set(k.subarray(i * KVD + kh * HD, i * KVD + (kh + 1) * HD), i * HD);
    vs.set(v.subarray(i * KVD + kh * HD, i * KVD + (kh + 1) * HD), i * HD);
  }
  const outRef = new Float32Array(n * G * HD);
  const window = [new Float32Array(A)];
  causalAttention(qs, ks, vs, n, G, 1, HD, outRef, {
    windows: [{ perKvHead: window, lastQueries: 32 }],
    audioStart: 1,
  });
  const everyRow = [new Float32Array(A)];
  causalAttention(qs, ks, vs, n, G, 1, HD, new Float32Array(n * G * HD), {
    windows: [{ perKvHead: everyRow, lastQueries: Infinity }],
    audioStart: 1,
  });

  const qb = upload(ctx, q);
  const kb = poolBuffer(ctx, k, kv);
  const vb = poolBuffer(ctx, v, kv);
  const out = empty(ctx, n * QD * 4);
  const ml = empty(ctx, n * H * 2 * 4);
  const layer = 2;
  const scores = empty(ctx, c.numLayers * HKV * A * 4);
  const params = (firstQuery: number) => ctx.uniform('p', [n, 1, A, firstQuery, layer, kh * G, kh, 0]);
  const tg = performance.now();
  dispatch(ctx, kn.causalAttention, [qb, kb, vb, out, ml, params(0)], Math.ceil(n / 64), G);
  const outAll = await readF32(ctx, out, n * QD);
  const gpuMs = performance.now() - tg;
  const got = new Float32Array(n * G * HD);
  for (let i = 0; i < n; i++) got.set(outAll.subarray(i * QD + kh * G * HD, i * QD + (kh + 1) * G * HD), i * G * HD);
  const off = (layer * HKV + kh) * A;
  const sc = { 0: qb, 1: kb, 5: params(n - 32), 6: scores, 7: ml };
  dispatch(ctx, kn.prefillScores, sc, Math.ceil(A / 64), 1);
  const gotWindow = (await readF32(ctx, scores, c.numLayers * HKV * A)).slice(off, off + A);
  const scoresAll = empty(ctx, c.numLayers * HKV * A * 4);
  dispatch(ctx, kn.prefillScores, { ...sc, 5: params(0), 6: scoresAll }, Math.ceil(A / 64), 1);
  const gotEvery = (await readF32(ctx, scoresAll, c.numLayers * HKV * A)).slice(off, off + A);
  // Two blocks of rows: [0, 2048) and [2048, n).
  const split = 2048;
  const outB = empty(ctx, n * QD * 4);
  const scoresB = empty(ctx, c.numLayers * HKV * A * 4);
  for (const [r0, r1] of [
    [0, split],
    [split, n],
  ]) {
    const rowsOfQ = (buf: GPUBuffer) => ({ buffer: buf, offset: r0 * QD * 4, size: (r1 - r0) * QD * 4 });
    const u = ctx.uniform('p', [r1, 1, A, 0, layer, kh * G, kh, r0]);
    dispatch(ctx, kn.causalAttention, [rowsOfQ(qb), kb, vb, rowsOfQ(outB), ml, u], Math.ceil((r1 - r0) / 64), G);
    dispatch(ctx, kn.prefillScores, { 0: rowsOfQ(qb), 1: kb, 5: u, 6: scoresB, 7: ml }, Math.ceil(A / 64), 1);
  }
  const outBlocks = await readF32(ctx, outB, n * QD);
  const gotBlocks = new Float32Array(n * G * HD);
  for (let i = 0; i < n; i++)
    gotBlocks.set(outBlocks.subarray(i * QD + kh * G * HD, i * QD + (kh + 1) * G * HD), i * G * HD);
  const gotEveryBlocks = (await readF32(ctx, scoresB, c.numLayers * HKV * A)).slice(off, off + A);
  const o = compare(`causal_prefill_attention (${kv} K/V)`, outRef, got, ATTN_BOUND, t0, 0.99);
  // The window only reaches the last 32 audio positions' neighbours: most scores are tiny but non-zero.
  const w = compare('scores_window32', window[0], gotWindow, ATTN_BOUND, t0, 0.99);
  const e = compare('scores_all_rows', everyRow[0], gotEvery, ATTN_BOUND, t0, 0.99);
  const ob = compare('out_in_blocks', outRef, gotBlocks, ATTN_BOUND, t0, 0.99);
  const eb = compare('scores_all_rows_in_blocks', everyRow[0], gotEveryBlocks, ATTN_BOUND, t0, 0.99);
  const pass = o.pass && w.pass && e.pass && ob.pass && eb.pass;
  return {
    ...o,
    pass,
    detail: `out: ${o.detail} (GPU ${Math.round(gpuMs)} ms); scores(last 32 rows): ${w.detail}; scores(all rows): ${e.detail}; in two row blocks: out ${ob.detail}, scores(all rows) ${eb.detail}`,
  };
}

/**
 * append_positions: the step's position lands in each head's new slot and nowhere else
 * (the step buffer is padded past the heads: padding must not be read as slots).
 */
async function appendPositionsTest(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels('f32');
  const heads = 100;
  const slotsTotal = 64 * 25;
  const r = rng(37);
  const slots = new Uint32Array(heads);
  for (let h = 0; h < heads; h++) slots[h] = (h * 17 + Math.floor(r() * 16)) % slotsTotal;
  const before = Int32Array.from({ length: slotsTotal }, (_, i) => (i % 7 === 0 ? -1 : i * 3));
  const pos = 23_456;
  const step = new Uint32Array(4 + heads + 3);
  step[0] = pos;
  step.set(slots, 4);
  const positions = upload(ctx, before);
  dispatch(ctx, k.appendPositions, { 6: upload(ctx, step), 8: ctx.uniform('n', [heads, 0, 0, 0]), 10: positions }, 2);
  const got = new Int32Array(await read(ctx, positions, slotsTotal * 4));
  const want = appendPositions(Int32Array.from(before), pos, slots);
  let wrong = 0;
  for (let i = 0; i < slotsTotal; i++) if (got[i] !== want[i]) wrong++;
  return {
    name: 'append_positions',
    pass: wrong === 0,
    detail: `${heads} heads' slots in ${slotsTotal}: ${wrong} entries differ from the reference`,
    ms: performance.now() - t0,
  };
}

export const attentionTests: Record<string, () => Promise<CheckResult>> = {
  append_positions: appendPositionsTest,
  rope_split: () => ropeSplitTest('f32'),
  rope_split_bias: () => ropeSplitTest('f32', true),
  rope_split_f16: () => ropeSplitTest('f16'),
  rope_split_bias_f16: () => ropeSplitTest('f16', true),
  qkv_rope_append: () => qkvAppendTest('f32'),
  qkv_rope_append_bias: () => qkvAppendTest('f32', true),
  kv_gather: () => gatherTest('f32'),
  paged_decode_attention: () => pagedDecodeTest('f32'),
  qkv_rope_append_f16: () => qkvAppendTest('f16'),
  kv_gather_f16: () => gatherTest('f16'),
  paged_decode_attention_f16: () => pagedDecodeTest('f16'),
  causal_prefill_attention: () => causalTest('f32'),
  causal_prefill_attention_f16: () => causalTest('f16'),
};
