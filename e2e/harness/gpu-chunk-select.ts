/**
 * chunk_select.wgsl against its plain-TS reference (src/reference/chunk-select.ts) and
 * against WnW's scheduler (ChunkScheduler, f64) at shipped scale: 30 minutes of Voxtral's
 * token rate (22,500 positions, 900 segments, the scaled top-k of 100 two-second chunks)
 * with five anchors among seven exported rows, ten minutes with a partial last segment under
 * the paper's 4 s chunks, and exact ties. Chunk indices must be equal, in order; segment
 * sums equal bit for bit (each is one thread's sum in the reference's order).
 */
import { ChunkScheduler } from '../../src/policy/wnw/chunks.js';
import { chunkOptionsFor, SCALED_RECALL } from '../../src/policy/wnw/recall.js';
import { chunkCounts, chunkScales, selectChunks, type ChunkSelectSpec } from '../../src/reference/chunk-select.js';
import { sharedUniforms } from '../../src/gpu/op.js';
import { rng } from '../../src/model/testing.js';
import { loadKernels } from './gpu-kernels.js';
import { empty, gpu, read, submit, upload, type CheckResult } from './gpu-util.js';

/** Softmax-like rows [rows][T], flat: positive, peaked, each summing to about one; `flat` ties every value. */
function attention(rows: number, T: number, seed: number, flat = false): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(rows * T);
  for (let h = 0; h < rows; h++) {
    const peak = Math.floor(r() * T);
    let s = 0;
    for (let p = 0; p < T; p++) s += out[h * T + p] = flat ? 1 : Math.exp(-Math.abs(p - peak) / 60) * r() + 1e-5 * r();
    for (let p = 0; p < T; p++) out[h * T + p] /= s;
  }
  return out;
}

function schedulerChoice(w: Float32Array, s: ChunkSelectSpec): number[] {
  const T = s.audioLength;
  const A = new Float64Array(T);
  for (let h = 0; h < s.heads; h++) for (let p = 0; p < T; p++) A[p] += w[h * T + p];
  const segments = Math.ceil(T / s.segmentLength);
  return new ChunkScheduler(
    T,
    s.segmentLength,
    { chunkSegments: s.chunkSegments, topChunks: s.topChunks, delta: 3 },
    new Float64Array(segments),
  ).step(A, 0).chunks;
}

async function chunkSelectCheck(
  name: string,
  spec: ChunkSelectSpec,
  rows: number,
  seed: number,
  flat = false,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const { segments, chunks } = chunkCounts(spec);
  const w = attention(rows, spec.audioLength, seed, flat);
  const own: GPUBuffer[] = [];
  const bufs = {
    weights: upload(ctx, w),
    scales: upload(ctx, chunkScales(spec)),
    segSums: empty(ctx, 4 * segments),
    scores: empty(ctx, 4 * chunks),
    chosen: upload(ctx, new Uint32Array(Math.max(1, spec.topChunks)).fill(0xffffffff)),
  };
  submit(
    ctx,
    k.chunkSelect.run(
      bufs,
      spec,
      sharedUniforms(ctx, (b) => own.push(b)),
    ),
  );
  const kept = Math.min(spec.topChunks, chunks);
  const got = Array.from(new Uint32Array(await read(ctx, bufs.chosen, 4 * kept)));
  const sums = new Uint32Array(await read(ctx, bufs.segSums, 4 * segments));
  for (const b of [...Object.values(bufs), ...own]) ctx.destroy(b);
  const ref = selectChunks(w, spec);
  const sched = schedulerChoice(w, spec);
  const refSums = new Uint32Array(ref.segmentSums.buffer);
  let sumDiffs = 0;
  for (let i = 0; i < segments; i++) if (sums[i] !== refSums[i]) sumDiffs++;
  const sameRef = got.join(',') === Array.from(ref.chunks).join(',');
  const sameSched = got.join(',') === sched.join(',');
  const nonZero = ref.segmentSums.filter((x) => x > 0).length / segments;
  const pass = sameRef && sameSched && sumDiffs === 0 && got.length === kept && nonZero > 0.5;
  const detail =
    `${spec.audioLength} positions, ${segments} segments, ${chunks} chunks of ${spec.chunkSegments}, top ${spec.topChunks}, ${spec.heads} of ${rows} rows summed: ` +
    `chunks ${sameRef ? 'equal to the reference' : `DIFFER from the reference (gpu ${got.slice(0, 8)} ts ${Array.from(ref.chunks.slice(0, 8))})`}, ${sameSched ? "equal to the scheduler's" : `DIFFER from the scheduler's (${sched.slice(0, 8)})`}; ` +
    `segment sums differing in bits: ${sumDiffs}; first chunks ${got.slice(0, 6).join(',')}; readback ${4 * kept} bytes instead of ${4 * spec.heads * spec.audioLength}`;
  return { name, pass, detail, ms: performance.now() - t0 };
}

const VOXTRAL_30 = 30 * 60 * 12.5;
const scaled = chunkOptionsFor(SCALED_RECALL, VOXTRAL_30, 25);

export const chunkSelectTests: Record<string, () => Promise<CheckResult>> = {
  chunk_select_voxtral_30min: () =>
    chunkSelectCheck(
      'chunk_select_voxtral_30min',
      {
        heads: 5,
        audioLength: VOXTRAL_30,
        segmentLength: 25,
        chunkSegments: scaled.chunkSegments,
        topChunks: scaled.topChunks,
      },
      7,
      31,
    ),
  chunk_select_paper_partial: () =>
    chunkSelectCheck(
      'chunk_select_paper_partial',
      { heads: 4, audioLength: 7513, segmentLength: 25, chunkSegments: 2, topChunks: 3 },
      4,
      32,
    ),
  // Every value equal: all full chunks tie, the partial last one scores the same mean; the lowest indices win.
  chunk_select_ties: () =>
    chunkSelectCheck(
      'chunk_select_ties',
      { heads: 3, audioLength: 1000, segmentLength: 25, chunkSegments: 2, topChunks: 5 },
      3,
      33,
      true,
    ),
};
