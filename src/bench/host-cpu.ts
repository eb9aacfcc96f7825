/**
 * The page's JavaScript of a decode step with the device left out (`npm run bench -- --host
 * --stand-in`): the policy's plan, the plan applied (releases, recalls, the recalled rows
 * copied into the mapped upload) and the step's tables (its text slots, the changed
 * positions and page-table entries staged, the upload's copies recorded on an encoder), over
 * the same Residency and GpuPool as a WebGPU session but a device that runs nothing.
 *
 * It tells apart what the host rows (./host.ts) mix on a software adapter: there the
 * compute of each step runs on the page's own cores between its steps and streams the
 * weights and the KV pool (gigabytes) through the CPU caches, so every step's bookkeeping
 * starts from caches that no longer hold it. Here nothing runs between steps (`evictMiB` 0,
 * as with a hardware GPU, which leaves the CPU's caches alone), or `evictMiB` of memory is
 * streamed before each step, as the software adapter's compute does. The WebGPU calls
 * themselves (encoding the step's dispatches, the submit, the readback) are the host rows'.
 *
 * The chunk choice stands for the device's (`chunk_select.wgsl`): the `topChunks` chunks
 * nearest a point that moves on `segmentsPerStep` segments a step, nearest first. Two
 * segments a step recall about as many positions as the host rows' WnW does from its moving
 * attention (both are printed).
 */
import { GpuPool } from '../backend/webgpu/pool.js';
import { ScatterRows } from '../backend/webgpu/ops.js';
import { poolLayout, residencyShape, stagingBytes } from '../backend/webgpu/pool-layout.js';
import type { GpuContext } from '../gpu/device.js';
import { Residency } from '../kv/residency.js';
import { GROWTH_PAGES_PER_HEAD, grownTextPages, poolNeed } from '../kv/sizing.js';
import { kvElementBytes } from '../kv/precision.js';
import { sessionPrompt, textPositions } from '../kv/prompt.js';
import { kvHeadCount, segmentLength } from '../model/config.js';
import type { PolicyName } from '../index.js';
import { syntheticHeads, timedSession } from './decode.js';
import { HOST_POLICIES, summary, syntheticObservation, type HostPageRequest } from './host.js';
import { shapeConfig } from './shapes.js';

export const STAND_IN_PHASES = ['plan', 'staging', 'tables'] as const;
export type StandInPhase = (typeof STAND_IN_PHASES)[number];

export interface StandInRow {
  policy: PolicyName;
  budget: number;
  /** The JavaScript engine it ran in: Node, or the page's in headless Chromium. */
  runtime: string;
  minutes: number;
  audioTokens: number;
  layers: number;
  steps: number;
  /** MiB streamed through the caches before each step (0: none, as with a hardware GPU). */
  evictMiB: number;
  /** Per step: the three phases' sum (median, p95, least), and each phase's median. */
  ms: { median: number; p95: number; min: number; medianByPhase: Record<StandInPhase, number> };
  recalledPerStep: number;
  /** Buffer copies the step's writes recorded (its upload into the landing buffer). */
  copiesPerStep: number;
  /** Scatter dispatches the step's writes recorded (one per pool shard holding rows of the step). */
  dispatchesPerStep: number;
}

export interface StandInRequest extends HostPageRequest {
  evictMiB: number[];
  segmentsPerStep: number;
}

/** Warm-up steps before the timed ones: the text pages' first growth and the JIT settle. */
const WARMUP = 8;

/** WebGPU's usage and map-mode flags (the spec's values), for a runtime without WebGPU (Node). */
function webGpuFlags(): void {
  const g = globalThis as { GPUBufferUsage?: unknown; GPUMapMode?: unknown };
  g.GPUBufferUsage ??= {
    MAP_READ: 1,
    MAP_WRITE: 2,
    COPY_SRC: 4,
    COPY_DST: 8,
    INDEX: 16,
    VERTEX: 32,
    UNIFORM: 64,
    STORAGE: 128,
    INDIRECT: 256,
    QUERY_RESOLVE: 512,
  };
  g.GPUMapMode ??= { READ: 1, WRITE: 2 };
}

/**
 * A GpuContext whose buffers hold memory only where the page writes into them (mapped
 * uploads), and whose queue and encoders only count: the page's side of each call, none of
 * the device's.
 */
function standInContext(): { ctx: GpuContext; copies: () => number; dispatches: () => number } {
  let copies = 0;
  let dispatches = 0;
  const buffer = (_label: string, size: number, usage = 0) => {
    let mapped: ArrayBuffer | null = null;
    return {
      size,
      mapAsync: () => Promise.resolve(),
      getMappedRange: (_offset = 0, length = size) => {
        if (!(usage & GPUBufferUsage.MAP_WRITE)) throw new Error('stand-in: only uploads are mapped');
        if (mapped?.byteLength !== length) mapped = new ArrayBuffer(length);
        return mapped;
      },
      unmap: () => {},
      destroy: () => {},
    };
  };
  const device = {
    queue: { writeBuffer: () => {}, submit: () => {} },
    createCommandEncoder: () => ({
      copyBufferToBuffer: () => void copies++,
      beginComputePass: () => ({
        setPipeline: () => {},
        setBindGroup: () => {},
        dispatchWorkgroups: () => void dispatches++,
        end: () => {},
      }),
      finish: () => ({}),
    }),
    pushErrorScope: () => {},
    popErrorScope: () => Promise.resolve(null),
  };
  const ctx = {
    buffer,
    uniform: (label: string, values: ArrayLike<number>) => buffer(label, 4 * values.length),
    bindGroup: () => ({}),
    destroy: () => {},
    device,
  };
  return { ctx: ctx as unknown as GpuContext, copies: () => copies, dispatches: () => dispatches };
}

/** The scatter's op over a pipeline the stand-in never runs. */
function standInScatter(ctx: GpuContext): ScatterRows {
  return new ScatterRows(ctx, {} as GPUComputePipeline);
}

/** Writes every cache line of `memory` once: what a software adapter's compute does to the caches between steps. */
function evict(memory: Uint8Array | null): void {
  if (!memory) return;
  for (let i = 0; i < memory.length; i += 64) memory[i]++;
}

/** One policy's steps over a stand-in device at `minutes` of audio, caches evicted by `evictMiB` before each. */
export async function standInPolicy(
  req: StandInRequest,
  minutes: number,
  policyName: PolicyName,
  budget: number,
  evictMiB: number,
  runtime: string,
): Promise<StandInRow> {
  webGpuFlags();
  const c = shapeConfig(req.shape, req.layers);
  const A = Math.round(minutes * 60 * c.audio.tokensPerSecond);
  const total = WARMUP + req.steps;
  const maxNewTokens = total + 3;
  const { policy, layout: pl, options } = timedSession(c, A, policyName, budget, syntheticHeads(c, 375), maxNewTokens);
  const plan = policy.prefill(syntheticObservation(pl, !!options.request.prefillKeys, 17));
  const P = segmentLength(c);
  const prompt = sessionPrompt(c, {});
  const text = textPositions(prompt, A);
  const { ctx, copies, dispatches } = standInContext();
  // Laid out and grown as a WebGPU session's pool (decode-session.ts placeWith), without a binding limit.
  const lay = poolLayout(
    c,
    poolNeed(plan, P, text.length).perHead,
    P,
    2 ** 31,
    kvElementBytes(req.kv),
    grownTextPages(text.length, maxNewTokens, P, 1),
  );
  const pool = new GpuPool(ctx, c, lay, new Uint32Array(kvHeadCount(c)).fill(0xffffffff));
  const res = new Residency(residencyShape(c, lay, prompt, A, { growPages: GROWTH_PAGES_PER_HEAD }), pool);
  // The rows' values are never read here: the store keeps zeros.
  res.applyPrefill(plan, text, () => {});
  pool.flush(res.pages);
  const memory = evictMiB > 0 ? new Uint8Array(evictMiB * 2 ** 20) : null;
  const segments = Math.ceil(A / P);
  const top = options.request.decodeChunks?.topChunks ?? 0;
  const enc = ctx.device.createCommandEncoder();
  const slots = new Int32Array(kvHeadCount(c));
  const phases: Record<StandInPhase, number>[] = [];
  let recalled = 0;
  let copied = 0;
  let scattered = 0;
  pool.startDecode(standInScatter(ctx), stagingBytes(lay.bytes));
  if (policy.afterPrefill) res.apply(policy.afterPrefill());
  for (let s = 0; s < total; s++) {
    // The uploads' maps resolve between steps, as a device's do.
    await new Promise((r) => setTimeout(r, 0));
    evict(memory);
    const center = Math.floor(segments / 4) + s * req.segmentsPerStep;
    const chunks = Int32Array.from(
      { length: top },
      (_, i) => (center + (i % 2 ? -1 : 1) * Math.ceil(i / 2) + segments) % segments,
    );
    const before = copies();
    const dispatchedBefore = dispatches();
    const t0 = performance.now();
    const p = policy.afterStep({ step: s, weights: [], chunks });
    const t1 = performance.now();
    const moved = res.apply(p);
    const t2 = performance.now();
    res.appendText(text.length + A + s, slots, true);
    pool.flush(res.pages);
    res.pages.longestTable();
    pool.encodeWrites(enc)?.submitted();
    const t3 = performance.now();
    if (s < WARMUP) continue;
    phases.push({ plan: t1 - t0, staging: t2 - t1, tables: t3 - t2 });
    recalled += moved.recalledPositions;
    copied += copies() - before;
    scattered += dispatches() - dispatchedBefore;
  }
  pool.destroy();
  const sums = summary(phases.map((p) => p.plan + p.staging + p.tables));
  return {
    policy: policyName,
    budget,
    runtime,
    minutes,
    audioTokens: A,
    layers: c.numLayers,
    steps: phases.length,
    evictMiB,
    ms: {
      median: sums.median,
      p95: sums.p95,
      min: sums.min,
      medianByPhase: Object.fromEntries(
        STAND_IN_PHASES.map((k) => [k, summary(phases.map((p) => p[k])).median]),
      ) as Record<StandInPhase, number>,
    },
    recalledPerStep: recalled / phases.length,
    copiesPerStep: copied / phases.length,
    dispatchesPerStep: scattered / phases.length,
  };
}

/** The policies a stand-in chunk choice can drive: Quest plans from the step's queries, which only a device computes. */
export const STAND_IN_POLICIES: PolicyName[] = ['full', 'wnw'];

/** Every policy of the request that a stand-in can drive, warm and evicted. */
export async function standInTimes(
  req: StandInRequest,
  runtime: string,
  log: (s: string) => void,
): Promise<StandInRow[]> {
  const rows: StandInRow[] = [];
  const wanted = (n: PolicyName) => STAND_IN_POLICIES.includes(n) && (!req.policies || req.policies.includes(n));
  for (const minutes of req.minutes)
    for (const [name, budget] of HOST_POLICIES.filter(([n]) => wanted(n)))
      for (const mib of req.evictMiB) {
        const row = await standInPolicy(req, minutes, name, budget, mib, runtime);
        log(
          `bench: stand-in ${runtime} ${minutes} min ${name}@${budget}, ${mib} MiB evicted: median ${row.ms.median.toFixed(3)} ms`,
        );
        rows.push(row);
      }
  return rows;
}
