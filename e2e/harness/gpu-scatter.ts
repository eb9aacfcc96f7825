/**
 * scatter_rows.wgsl against its plain-TS reference (src/reference/scatter-rows.ts) at
 * shipped scale: Voxtral's decoder, 30 layers × 8 KV heads × 128 dims, its 25-slot pages,
 * the pool in two shards of 15 layers, f32 and f16 pools. A step's writes as WnW makes
 * them: 85 tidal heads each recalling a whole segment into a fresh page and a few rows into
 * holes, summary-like single rows, the changed positions and page-table entries of every
 * head. Every word of both shards' K and V, the positions and the tables must equal the
 * reference's (a scatter copies words: bound 0), and the reference must equal the writes
 * applied one by one, so neither can agree with the other by skipping rows.
 */
import { segmentLength } from '../../src/model/config.js';
import { shapeConfig } from '../../src/bench/shapes.js';
import { modelConstants } from '../../src/backend/webgpu/kernels.js';
import { grid } from '../../src/backend/webgpu/groups.js';
import {
  ENTRY_WORDS,
  INDEX_HEADER_WORDS,
  SCATTER_POSITIONS,
  SCATTER_TABLES,
  SCATTER_WORDS,
  scatterRows,
} from '../../src/reference/scatter-rows.js';
import type { KvPrecision } from '../../src/kv/precision.js';
import { rng } from '../../src/model/testing.js';
import { gpu, read, upload, type CheckResult } from './gpu-util.js';

const SHAPE = shapeConfig('voxtral-mini-3b', 30);
const PAGE = segmentLength(SHAPE);
const HEADS = SHAPE.numLayers * SHAPE.numKvHeads;
/** Pages per head: a fifth of 30 minutes' 900 segments would be 180; 12 keep the buffers small and the shards two. */
const PAGES_PER_HEAD = 12;
const SHARD_HEADS = HEADS / 2;
const SHARD_PAGES = SHARD_HEADS * PAGES_PER_HEAD;
const TABLE_WORDS = 4 * HEADS + HEADS * (PAGES_PER_HEAD + 16);

interface Write {
  shard: number;
  slot: number;
  rows: number;
  words: Uint32Array;
}

async function scatterTest(kv: KvPrecision): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx, cache } = await gpu();
  const pipeline = await cache.get('scatter_rows.wgsl', 'scatter_rows', modelConstants(SHAPE, PAGE, kv));
  const r = rng(kv === 'f16' ? 57 : 75);
  const rowWords = kv === 'f16' ? SHAPE.headDim / 2 : SHAPE.headDim;
  const shardWords = SHARD_PAGES * PAGE * rowWords;
  const random = (n: number) => Uint32Array.from({ length: n }, () => Math.floor(r() * 2 ** 32));
  // What the pool held before the step: every word random, so an untouched word is seen as such.
  const before = {
    k: [random(shardWords), random(shardWords)],
    v: [random(shardWords), random(shardWords)],
    positions: random(2 * SHARD_PAGES * PAGE),
    tables: random(TABLE_WORDS),
  };
  // The step's row writes: per tidal head (85, spread over both shards) a segment into its
  // own fresh page, and 1-7 rows into holes of another page; and 40 single rows.
  const rows: Write[] = [];
  const tidal = Array.from({ length: HEADS }, (_, h) => h)
    .sort(() => r() - 0.5)
    .slice(0, 85);
  for (const h of tidal) {
    const shard = h < SHARD_HEADS ? 0 : 1;
    const page0 = (h % SHARD_HEADS) * PAGES_PER_HEAD;
    const fresh = page0 + Math.floor(r() * (PAGES_PER_HEAD / 2));
    rows.push({ shard, slot: fresh * PAGE, rows: PAGE, words: random(2 * PAGE * rowWords) });
    const holes = 1 + Math.floor(r() * 7);
    const page = page0 + PAGES_PER_HEAD / 2 + Math.floor(r() * (PAGES_PER_HEAD / 2 - 1));
    const at = Math.floor(r() * (PAGE - holes));
    rows.push({ shard, slot: page * PAGE + at, rows: holes, words: random(2 * holes * rowWords) });
  }
  for (let i = 0; i < 40; i++) {
    const shard = i % 2;
    const h = shard * SHARD_HEADS + Math.floor(r() * SHARD_HEADS);
    // The last page of each head: no segment or hole write above lands there.
    const slot = ((h % SHARD_HEADS) * PAGES_PER_HEAD + PAGES_PER_HEAD - 1) * PAGE + (i % PAGE);
    rows.push({ shard, slot, rows: 1, words: random(2 * rowWords) });
  }
  // Changed positions (one span per row write, as the flush marks them) and each head's table tail.
  const words: { target: number; at: number; words: Uint32Array }[] = [];
  for (const w of rows)
    words.push({
      target: SCATTER_POSITIONS,
      at: w.shard * SHARD_PAGES * PAGE + w.slot,
      words: random(w.rows),
    });
  for (let h = 0; h < HEADS; h++)
    words.push({ target: SCATTER_TABLES, at: 4 * HEADS + h * (PAGES_PER_HEAD + 16) + 3, words: random(2) });
  // The landing buffer as StepWrites lays it out: the index, then every entry's words.
  const entries = rows.length + words.length;
  const dataStart = INDEX_HEADER_WORDS + ENTRY_WORDS * entries;
  let total = dataStart;
  for (const w of rows) total += w.words.length;
  for (const w of words) total += w.words.length;
  const landing = new Uint32Array(total);
  landing[0] = entries;
  let e = 0;
  let src = dataStart;
  const entry = (dst: number, n: number, tag: number, data: Uint32Array) => {
    landing.set([dst, src, n, tag], INDEX_HEADER_WORDS + ENTRY_WORDS * e++);
    landing.set(data, src);
    src += data.length;
  };
  // Rows and words interleaved, as a step stages them while it applies its plan.
  rows.forEach((w, i) => {
    entry(w.slot, w.rows, w.shard, w.words);
    entry(words[i].at, words[i].words.length, SCATTER_WORDS | words[i].target, words[i].words);
  });
  for (const w of words.slice(rows.length)) entry(w.at, w.words.length, SCATTER_WORDS | w.target, w.words);
  // The reference, and the same writes applied one by one.
  const want = {
    k: before.k.map((a) => a.slice()),
    v: before.v.map((a) => a.slice()),
    positions: before.positions.slice(),
    tables: before.tables.slice(),
  };
  scatterRows(landing, rowWords, want);
  const direct = {
    k: before.k.map((a) => a.slice()),
    v: before.v.map((a) => a.slice()),
    positions: before.positions.slice(),
    tables: before.tables.slice(),
  };
  for (const w of rows) {
    const n = w.rows * rowWords;
    direct.k[w.shard].set(w.words.subarray(0, n), w.slot * rowWords);
    direct.v[w.shard].set(w.words.subarray(n), w.slot * rowWords);
  }
  for (const w of words) (w.target === SCATTER_TABLES ? direct.tables : direct.positions).set(w.words, w.at);
  const same = (a: Uint32Array, b: Uint32Array) => a.length === b.length && a.every((x, i) => x === b[i]);
  const refOk = [0, 1].every((s) => same(want.k[s], direct.k[s]) && same(want.v[s], direct.v[s]));
  const refWordsOk = same(want.positions, direct.positions) && same(want.tables, direct.tables);
  // The kernel: one dispatch per shard, the first also writing the words.
  const gpuBufs = {
    k: before.k.map((a) => upload(ctx, a)),
    v: before.v.map((a) => upload(ctx, a)),
    positions: upload(ctx, before.positions),
    tables: upload(ctx, before.tables),
  };
  const land = upload(ctx, landing);
  const enc = ctx.device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  const [gx, gy] = grid(entries);
  for (const s of [0, 1]) {
    const bg = ctx.bindGroup(pipeline, [
      land,
      gpuBufs.k[s],
      gpuBufs.v[s],
      gpuBufs.positions,
      gpuBufs.tables,
      ctx.uniform('u.scatter', [s, s === 0 ? 1 : 0, 0, 0]),
    ]);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(gx, gy);
  }
  pass.end();
  ctx.device.queue.submit([enc.finish()]);
  const got = async (b: GPUBuffer, n: number) => new Uint32Array(await read(ctx, b, 4 * n));
  let wrong = 0;
  for (const s of [0, 1]) {
    const k = await got(gpuBufs.k[s], shardWords);
    const v = await got(gpuBufs.v[s], shardWords);
    for (let i = 0; i < shardWords; i++) wrong += +(k[i] !== want.k[s][i]) + +(v[i] !== want.v[s][i]);
  }
  const pos = await got(gpuBufs.positions, want.positions.length);
  const tab = await got(gpuBufs.tables, want.tables.length);
  for (let i = 0; i < pos.length; i++) wrong += +(pos[i] !== want.positions[i]);
  for (let i = 0; i < tab.length; i++) wrong += +(tab[i] !== want.tables[i]);
  const rowsMoved = rows.reduce((n, w) => n + w.rows, 0);
  return {
    name: `scatter_rows_${kv}`,
    pass: wrong === 0 && refOk && refWordsOk,
    detail:
      `${kv} pool, ${SHAPE.numLayers}x${SHAPE.numKvHeads}x${SHAPE.headDim}, 2 shards of ${shardWords} words: ` +
      `${rowsMoved} rows in ${rows.length} runs and ${words.length} word runs; ${wrong} words differ from the reference; ` +
      `reference ${refOk && refWordsOk ? 'equals' : 'DIFFERS from'} the writes applied one by one`,
    ms: performance.now() - t0,
  };
}

export const scatterTests: Record<string, () => Promise<CheckResult>> = {
  scatter_rows_voxtral_f32: () => scatterTest('f32'),
  scatter_rows_voxtral_f16: () => scatterTest('f16'),
};
