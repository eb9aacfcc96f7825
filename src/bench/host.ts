/**
 * The page's own time per decode step, which runs on the CPU whatever the GPU: from the
 * start of a step's preparation to its submit returning, plus the read's handling once its
 * map has resolved (copying, the readouts), the policy's next plan and the staging of the
 * rows it recalls. The wait for the GPU is left out (step-probe.ts times when each map
 * resolved), and each timed part runs with the device idle. Phases: plan (the policy's afterStep), staging (the plan applied: recalled rows
 * copied into the step's mapped upload, and any written directly while its encoder is open), uniforms and tables
 * (the step's position, token, page tables and positions written), encoding, submit,
 * readback (the mapped slot read). Calls to the device per step are counted beside.
 *
 * The KV pool is placed without a prefill (WebGpuBackend.openUnfilled): synthetic scores
 * and keys stand for the prefill's observation, so a 30-minute pool is placed in seconds
 * on a software adapter. The policy plans from that observation as it would from a real one.
 */
import type { WebGpuBackend } from '../backend/webgpu/backend.js';
import { audioStart, isStop, type ModelConfig } from '../model/config.js';
import { rope, ropeFrequencies } from '../reference/ops.js';
import { rng } from '../model/testing.js';
import type { PolicyLayout, PrefillObservation } from '../kv/plan.js';
import { planLagOf } from '../policy/types.js';
import type { HeadsFile } from '../model/heads.js';
import type { KvPrecision } from '../index.js';
import type { PolicyName } from '../index.js';
import { packedWeightBytes } from '../model/packed-weights.js';
import { syntheticHeads, timedSession } from './decode.js';
import { randomPackedWeights, shapeConfig } from './shapes.js';
import { StepProbe, type CallCounts } from './step-probe.js';

export const HOST_PHASES = ['plan', 'staging', 'uniformsAndTables', 'encoding', 'submit', 'readback'] as const;
export type HostPhase = (typeof HOST_PHASES)[number];

export interface HostRow {
  policy: PolicyName;
  budget: number;
  backend: string;
  minutes: number;
  audioTokens: number;
  layers: number;
  /** Step t + 1 queued before step t is read (the policy's planLag 2), or each step waited for. */
  loop: 'pipelined' | 'waiting';
  steps: number;
  /**
   * `min`: the least step; on a CPU shared with other work a step's wall time only ever
   * gains from preemption, so the least is the closest to the page's own work.
   */
  hostMs: {
    mean: number;
    median: number;
    p95: number;
    min: number;
    /** Each phase's mean over the steps: one preempted step moves it, as it moves `mean`. */
    byPhase: Record<HostPhase, number>;
    /** Each phase's median over the steps (they need not add up to `median`). */
    medianByPhase: Record<HostPhase, number>;
  };
  callsPerStep: CallCounts;
  /** Audio positions the plans recalled per step (mean): WnW and Quest move rows every few steps. */
  recalledPerStep: number;
  /** Bytes of recalled rows written to the GPU per step (mean). */
  recalledBytesPerStep: number;
  /** Timed steps whose plan recalled any rows. */
  recallSteps: number;
  /**
   * The least ms this CPU takes to copy a step's recalled bytes (`recalledBytesPerStep`) out
   * of memory far past its caches, in runs of a page's rows (a recall's runs are at most a
   * page): the part of the staging phase that is the memory's, which no bookkeeping removes.
   * 0 where nothing was recalled.
   */
  recallCopyMs: number;
  /** The step's weight bytes / bandwidth, in ms: below it a GPU waits for the memory, not the page. */
  weightFloorMs: number;
  /** Median host ms / weightFloorMs: above 1 the page, not the GPU, would set the speed. */
  hostOverFloor: number;
}

export interface HostRun {
  config: ModelConfig;
  heads: HeadsFile;
  minutes: number[];
  steps: number;
  /** Decoder weight bytes one step reads, and the bandwidth (GB/s) of the floor. */
  weightBytesPerStep: number;
  bandwidthGBs: number;
  /** The policies timed, with their budgets. */
  policies: [PolicyName, number][];
}

export const HOST_POLICIES: [PolicyName, number][] = [
  ['full', 1],
  ['wnw', 0.2],
  ['quest', 0.2],
];

/** Steps run before the timed ones: pipelines' first use, the JIT, the pool's first growth. */
export const HOST_WARMUP = 4;

const now = () => performance.now();

/** A prefill observation of seeded scores (a few positions stand out, as speech's do) and keys. */
export function syntheticObservation(layout: PolicyLayout, keys: boolean, seed: number): PrefillObservation {
  const r = rng(seed);
  const heads = layout.numLayers * layout.numKvHeads;
  const A = layout.audioLength;
  const scores = Array.from({ length: heads }, () => {
    const s = new Float32Array(A);
    for (let i = 0; i < A; i++) s[i] = r() ** 8;
    return s;
  });
  if (!keys) return { layout, scores };
  // One key table for every head: the bounds a paged policy builds are per head either way.
  const k = new Float32Array(A * layout.headDim);
  for (let i = 0; i < k.length; i++) k[i] = r() * 2 - 1;
  return { layout, scores, keys: Array.from({ length: heads }, () => k) };
}

/**
 * Audio positions the anchors' attention peak moves on per decode step: speech's pace, about
 * 3 text tokens a second against 12.5 audio positions (a new segment every 6 steps or so).
 */
export const AUDIO_PER_STEP = 4;

/**
 * Rows for the kept positions: a small seeded table, cycled (their values are never timed);
 * the anchors' audio keys are one key `u` turned by RoPE to position a / pace (a: the audio
 * index). A query R(p)·q at decode position p meets them as q·R(a / pace − p)·u, a function
 * of a / pace − p alone: as p grows by one, the anchors' attention, its peak and the chunks
 * it picks move on by `pace` positions, as speech's move along the transcript, and the
 * tidal heads recall the segments it moves into (q itself holds nearly still: SHARED_EMBEDDING).
 */
/**
 * The embedding rows' shared part, against their own uniform ±1 (shapes.ts
 * `randomPackedWeights`): the hidden state is nearly the same whatever token is fed, so each
 * layer's query (before RoPE) holds nearly still from step to step, as a real decoder's
 * anchors' queries do over a stretch of speech; only its position turns it.
 */
export const SHARED_EMBEDDING = 8;

/** The anchors' audio keys' entries are uniform in ±this: their attention peaks within a few segments. */
const ANCHOR_KEY_SCALE = 6;

/**
 * The fastest RoPE pair the anchors' keys use, in radians per audio position: their attention
 * varies over tens of positions (a segment or two), not from one position to the next, so the
 * chunks it ranks highest change as its peak moves on, not at every step.
 */
const ANCHOR_KEY_TURN = 0.02;

export function syntheticRows(
  c: ModelConfig,
  audioLength: number,
  seed: number,
  anchors: readonly number[],
  pace = AUDIO_PER_STEP,
) {
  const headDim = c.headDim;
  const r = rng(seed);
  const n = 61;
  const table = Float32Array.from({ length: n * headDim }, () => r() * 2 - 1);
  const freqs = ropeFrequencies(headDim, c.ropeTheta);
  const half = headDim / 2;
  const u = Float32Array.from({ length: headDim }, (_, i) =>
    freqs[i % half] / pace > ANCHOR_KEY_TURN ? 0 : (r() * 2 - 1) * ANCHOR_KEY_SCALE,
  );
  const isAnchor = new Uint8Array(c.numLayers * c.numKvHeads);
  for (const h of anchors) isAnchor[h] = 1;
  const a0 = audioStart(c);
  return (head: number, seqPos: number, k: Float32Array, kOff: number, v: Float32Array, vOff: number) => {
    const a = seqPos - a0;
    const b = ((seqPos * 13 + head + 1) % n) * headDim;
    v.set(table.subarray(b, b + headDim), vOff);
    if (isAnchor[head] && a >= 0 && a < audioLength) {
      k.set(u, kOff);
      rope(k, kOff, 1, headDim, a / pace, freqs);
      return;
    }
    const o = ((seqPos * 7 + head) % n) * headDim;
    k.set(table.subarray(o, o + headDim), kOff);
  };
}

/** Mean, median, 95th percentile (the nearest rank: a value of the steps) and least of `xs`. */
export function summary(xs: number[]): { mean: number; median: number; p95: number; min: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (f: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(f * s.length) - 1))];
  return { mean: xs.reduce((a, b) => a + b, 0) / xs.length, median: at(0.5), p95: at(0.95), min: s[0] };
}

/** Host time of one policy's decode steps on `backend`, probed through `probe` (made on its device). */
export async function hostTimePolicy(
  backend: WebGpuBackend,
  probe: StepProbe,
  run: HostRun,
  minutes: number,
  policyName: PolicyName,
  budget: number,
  log?: (s: string) => void,
): Promise<HostRow> {
  const c = run.config;
  const A = Math.round(minutes * 60 * c.audio.tokensPerSecond);
  const total = HOST_WARMUP + run.steps;
  const { policy, layout, options } = timedSession(c, A, policyName, budget, run.heads, total + 3);
  const stage = backend.openUnfilled(options);
  const session = await stage.place(
    policy.prefill(syntheticObservation(layout, !!options.request.prefillKeys, 17)),
    syntheticRows(c, A, 19, policy.headRoles?.anchors ?? []),
  );
  try {
    if (policy.afterPrefill) await session.apply(policy.afterPrefill());
    const pipelined = planLagOf(policy) >= 2;
    const phases: Record<HostPhase, number>[] = [];
    const hosts: number[] = [];
    const calls: CallCounts = { writeBuffer: 0, createBindGroup: 0, createBuffer: 0, mapAsync: 0 };
    let recalled = 0;
    let recalledBytes = 0;
    let recallSteps = 0;
    // Any text token: what is fed does not change the work of a step.
    let token = 1000 % c.vocabSize;
    const queue = backend.ctx.device.queue;
    probe.clearMaps();
    if (pipelined) session.submit(token);
    for (let i = 0; i < total; i++) {
      // Each timed part starts with the device idle: a software adapter's GPU work runs on the
      // page's CPU cores and would be counted as the page's own (a hardware GPU takes none).
      await queue.onSubmittedWorkDone();
      const p0 = probe.snapshot();
      const t0 = now();
      session.submit(pipelined ? null : token);
      const t1 = now();
      await queue.onSubmittedWorkDone();
      const tr = now();
      const r = await session.read();
      const t2 = now();
      const mapped = probe.takeMap();
      const plan = policy.afterStep(r.observation);
      const t3 = now();
      const moved = await session.apply(plan);
      const t4 = now();
      const p1 = probe.snapshot();
      if (!isStop(c, r.token)) token = r.token;
      // A software adapter takes tens of seconds a step at this shape: say where the run is.
      log?.(
        `bench: ${policyName} step ${i + 1} of ${total} at ${(t4 / 1000).toFixed(0)} s, ` +
          `${moved.recalledPositions} positions recalled`,
      );
      if (i < HOST_WARMUP) continue;
      const enc = p1.times.encoding - p0.times.encoding;
      const staged = p1.times.staging - p0.times.staging;
      const sub = p1.times.submit - p0.times.submit;
      const ph: Record<HostPhase, number> = {
        plan: t3 - t2,
        staging: t4 - t3 + staged,
        uniformsAndTables: t1 - t0 - enc - staged - sub,
        encoding: enc,
        submit: sub,
        // From the later of the read's start and its map's resolving: the GPU's time is not the page's.
        readback: t2 - Math.max(tr, Number.isNaN(mapped) ? tr : mapped),
      };
      phases.push(ph);
      hosts.push(HOST_PHASES.reduce((a, k) => a + ph[k], 0));
      for (const k of Object.keys(calls) as (keyof CallCounts)[]) calls[k] += p1.counts[k] - p0.counts[k];
      recalled += moved.recalledPositions;
      recalledBytes += moved.bytesToGpu;
      if (moved.recalledPositions > 0) recallSteps++;
    }
    const n = run.steps;
    const byPhase = Object.fromEntries(HOST_PHASES.map((k) => [k, phases.reduce((a, p) => a + p[k], 0) / n])) as Record<
      HostPhase,
      number
    >;
    const medianByPhase = Object.fromEntries(
      HOST_PHASES.map((k) => [k, summary(phases.map((p) => p[k])).median]),
    ) as Record<HostPhase, number>;
    const h = summary(hosts);
    const weightFloorMs = (run.weightBytesPerStep / (run.bandwidthGBs * 1e9)) * 1000;
    const pool = session.poolLayout();
    const pageRowBytes = pool.pageSize * c.headDim * pool.elementBytes;
    return {
      policy: policyName,
      budget,
      backend: backend.label,
      minutes,
      audioTokens: A,
      layers: c.numLayers,
      loop: pipelined ? 'pipelined' : 'waiting',
      steps: n,
      hostMs: { ...h, byPhase, medianByPhase },
      callsPerStep: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, v / n])) as unknown as CallCounts,
      recalledPerStep: recalled / n,
      recalledBytesPerStep: recalledBytes / n,
      recallSteps,
      recallCopyMs: recalled ? recallCopyMs(recalledBytes / n, pageRowBytes) : 0,
      weightFloorMs,
      hostOverFloor: h.median / weightFloorMs,
    };
  } finally {
    session.close();
  }
}

/** Bytes the copy floor reads from: the offload store holds gigabytes at 30 minutes; this is past any CPU cache. */
const COPY_SPAN = 256 * 2 ** 20;

/**
 * The least of `repeats` copies of `bytes` in runs of `runBytes`, each from a seeded place in
 * `span` bytes, into one array: what moving a step's recalled rows costs this CPU's memory,
 * bookkeeping aside.
 */
export function recallCopyMs(bytes: number, runBytes: number, repeats = 12, span = COPY_SPAN): number {
  const src = new Uint8Array(span);
  // Touched, so the copies read memory that is there rather than pages the system maps on first use.
  for (let i = 0; i < src.length; i += 4096) src[i] = i & 255;
  const runs = Math.max(1, Math.round(bytes / runBytes));
  const dst = new Uint8Array(runs * runBytes);
  const r = rng(23);
  // Other places each repeat: rows read once, as a recall's are, never from the cache a repeat left.
  const from = Int32Array.from({ length: runs * repeats }, () => Math.floor(r() * (span / runBytes - 1)) * runBytes);
  let least = Infinity;
  for (let k = 0; k < repeats; k++) {
    const t = now();
    for (let i = 0; i < runs; i++) {
      const at = from[k * runs + i];
      dst.set(src.subarray(at, at + runBytes), i * runBytes);
    }
    least = Math.min(least, now() - t);
  }
  return least;
}

/** Every policy of `run` at every length, on one backend whose device the probe wraps from here on. */
export async function hostTimes(backend: WebGpuBackend, run: HostRun, log: (s: string) => void): Promise<HostRow[]> {
  const probe = new StepProbe(backend.ctx.device);
  const rows: HostRow[] = [];
  try {
    for (const minutes of run.minutes)
      for (const [name, budget] of run.policies) {
        const row = await hostTimePolicy(backend, probe, run, minutes, name, budget, log);
        log(
          `bench: host ${minutes} min ${name}@${budget}: median ${row.hostMs.median.toFixed(3)} ms, ` +
            `p95 ${row.hostMs.p95.toFixed(3)} ms, min ${row.hostMs.min.toFixed(3)} ms, writeBuffer ${row.callsPerStep.writeBuffer.toFixed(1)}/step`,
        );
        rows.push(row);
      }
  } finally {
    probe.detach();
  }
  return rows;
}

/** What the page needs to rebuild the run: the config is remade there from the shape. */
export interface HostPageRequest {
  shape: string;
  layers: number;
  minutes: number[];
  steps: number;
  kv: KvPrecision;
  bandwidthGBs: number;
  /** Names of HOST_POLICIES to time (all when absent): a long recording's full cache takes minutes a step on software. */
  policies?: PolicyName[];
}

/** The run of a request: config, synthetic heads, weights and the bytes a step reads. */
export function hostRunOf(r: HostPageRequest) {
  const config = shapeConfig(r.shape, r.layers);
  const weights = randomPackedWeights(config, 'q4', 1, SHARED_EMBEDDING);
  const bytes = packedWeightBytes(weights);
  const run: HostRun = {
    config,
    heads: syntheticHeads(config, 375),
    minutes: r.minutes,
    steps: r.steps,
    weightBytesPerStep: bytes.total - bytes.embed + config.hiddenSize * 4,
    bandwidthGBs: r.bandwidthGBs,
    policies: HOST_POLICIES.filter(([name]) => !r.policies || r.policies.includes(name)),
  };
  return { run, weights };
}
