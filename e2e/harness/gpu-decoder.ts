/**
 * Whole-decoder parity: WebGpuBackend against CpuBackend, greedy tokens identical after a
 * long prefill, with one policy-like plan applied to both (different subsets per head,
 * CPU mirrors, offloaded and dropped positions) and recall/release plans mid-decode, or
 * with the WnW policy itself deciding on the CPU run's observations (the GPU run replays
 * its plans, so both backends see identical page tables).
 * A case is (config, weights, audio embeddings, optional golden tokens/logits), so the
 * shipped model's fixtures plug in as another case.
 */
import { kvHeadCount, promptLength, segmentLength, type ModelConfig, type PromptIds } from '../../src/model/config.js';
import type { DecoderWeights } from '../../src/model/weights.js';
import type {
  DecodeSession,
  DecoderBackend,
  SessionOptions,
  StepCounters,
  StepResult,
} from '../../src/backend/types.js';
import type { Readouts } from '../../src/backend/readouts.js';
import { WebGpuDecodeSession } from '../../src/backend/webgpu/decode-session.js';
import type {
  AttentionRequest,
  LayerPrefill,
  PolicyLayout,
  PrefillObservation,
  PrefillPlan,
  StepObservation,
  StepPlan,
} from '../../src/kv/plan.js';
import type { HeadsFile } from '../../src/model/heads.js';
import { layerwise } from '../../src/policy/layered.js';
import { policyLayout } from '../../src/kv/prompt.js';
import { buildHeadsFile } from '../../src/calibrate/heads-file.js';
import { createPolicy } from '../../src/policy/registry.js';
import { planLagOf } from '../../src/policy/types.js';
import { rng } from '../../src/model/testing.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
import { packDecoderWeights, type PackedDecoderWeights } from '../../src/model/packed-weights.js';
import type { PackedWeightSource } from '../../src/model/packed-source.js';
import { WebGpuBackend, type WebGpuBackendOptions } from '../../src/backend/webgpu/backend.js';
import { gpu, nmse, type CheckResult } from './gpu-util.js';

export interface ParityCase {
  name: string;
  config: ModelConfig;
  weights: DecoderWeights;
  audio: Float32Array;
  steps: number;
  /**
   * 'policy': a policy-like prefill plan and recall/release plans mid-decode (exercises the
   * pool); 'full': every audio position stays on the GPU (what golden fixtures assume);
   * 'wnw': the WnW policy at `budget`, heads triaged from a synthetic heads file.
   */
  mode: 'policy' | 'full' | 'wnw';
  /** 'wnw' mode: the target r_GPU. */
  budget?: number;
  /** 'wnw' mode: policy options beside the budget and heads (`summaryMass`, …). */
  policyOptions?: Record<string, number | string | boolean>;
  /**
   * Golden greedy tokens / logits [steps, vocab] from the training code (step 0 = after the
   * prompt), full cache. In 'policy' mode only step 0 (before any plan) is compared.
   */
  golden?: { tokens: Int32Array; logits?: Float32Array };
  /** Options of the GPU backend (e.g. a binding cap that shards the pool). */
  backend?: Omit<WebGpuBackendOptions, 'context'>;
  /** Pool shards (at least) and prefill row blocks the GPU session must use. */
  layout?: { minShards: number; prefillBlocks: number };
  /** Row parts (at least) the GPU must split the embedding table and the lm_head into. */
  weightParts?: { embed: number; lmHead: number };
  /** Both backends get the weights already packed in backend.weightFormat (a converted folder's path). */
  prepacked?: boolean;
  /**
   * A converted folder's decoder: the CPU computes with it `packed` in memory, the GPU
   * streams it from its files (`source`, src/model/packed-source.ts); `weights` is unused.
   */
  streamed?: { packed: PackedDecoderWeights; source: PackedWeightSource };
  /**
   * Both backends prefill layer by layer (prefillByLayer), placing each layer's plan before
   * the next layer runs ('full' and 'wnw' modes); the GPU's allocation peak is checked.
   */
  layered?: boolean;
  /** Times the GPU's KV pool must at least have grown for the text during the steps (text KV on demand). */
  minGrowths?: number;
  /** A session prompt other than the config's (another language's), handed to both backends at open(). */
  prompt?: PromptIds;
  /**
   * The GPU decodes pipelined: step t + 1 queued (fed the token step t wrote on the GPU)
   * before step t is read, one step queued past the last read; the CPU waits for each step.
   * WnW's plans then apply at its planLag (policyOptions.planLag 2: two steps after).
   */
  pipelined?: boolean;
  /** 'wnw' mode: the policy's request as it is (its anchors reduced to chunks, no weights or queries read back). */
  chunksOnly?: boolean;
  /**
   * After the steps, the text is rewound to the end of the prompt (a recording's next
   * request forks there) and `steps` more are decoded from the prefill's token: both
   * backends agree, the text's pages go back to the pool, and under the full cache the
   * second pass repeats the first.
   */
  rewind?: boolean;
}

/** Keeps a different top-scored share of the audio per head; CPU copies: mirror, offload or drop. */
export function prefillPlan(c: ModelConfig, A: number, scores: Float32Array[]): PrefillPlan {
  const heads = kvHeadCount(c);
  const plan: PrefillPlan = { heads: [] };
  for (let h = 0; h < heads; h++) {
    const share = 0.3 + (0.7 * ((h * 7) % 11)) / 10;
    const order = Array.from({ length: A }, (_, i) => i).sort((a, b) => scores[h][b] - scores[h][a] || a - b);
    const keep = Int32Array.from(order.slice(0, Math.ceil(share * A))).sort();
    const kept = new Set(keep);
    const all = Int32Array.from({ length: A }, (_, i) => i);
    const cpu = h % 3 === 0 ? all : h % 3 === 1 ? all.filter((p) => !kept.has(p)) : new Int32Array(0);
    plan.heads.push({ gpu: keep, cpu });
  }
  return plan;
}

/** Mid-decode traffic: even heads release a 2 s segment, heads with CPU copies recall one. */
export function stepPlan(c: ModelConfig, A: number, plan: PrefillPlan, step: number): StepPlan {
  const P = segmentLength(c);
  const segs = Math.max(1, Math.floor(A / P));
  const out: StepPlan = { recall: [], release: [] };
  for (let h = 0; h < plan.heads.length; h++) {
    const rel = (h * 5 + step * 3) % segs;
    if (h % 2 === 0)
      out.release.push({
        head: h,
        positions: Int32Array.from({ length: P }, (_, i) => rel * P + i).filter((p) => p < A),
      });
    const cpu = new Set(plan.heads[h].cpu);
    if (cpu.size === 0) continue;
    const rec = (h * 3 + step * 7 + 1) % segs;
    const positions = Int32Array.from({ length: P }, (_, i) => rec * P + i).filter((p) => p < A && cpu.has(p));
    if (positions.length) out.recall.push({ head: h, positions });
  }
  return out;
}

const PLAN_STEPS = [6, 17, 33, 50];

interface Trace {
  tokens: number[];
  logits: Float32Array[];
  weights: Float32Array[][];
  queries: Float32Array[][];
  /** Per step: the chunks chosen from the anchors (decodeChunks), as text. */
  chunks: string[];
  /** Per step: word timing's focus of the anchors (decodeFocus), NaN where not asked. */
  focus: number[];
  residency: string[];
  /** r_GPU after the prefill plan and after every step plan. */
  rGpu: number[];
  prefillScores: Float32Array[];
  counters: StepCounters[];
  ms: { prefill: number; decode: number };
  /** WebGPU: the pool the plan made (shards, pages, bytes). */
  pool?: { shards: number; pages: number; bytes: number };
  /** WebGPU: the most bytes of buffers the session held at once up to the end of the prefill. */
  peakBytes?: number;
  /** ParityCase.rewind: text pages after the placement and after the rewind, and the second pass. */
  rewound?: { pagesPlaced: number; pagesBefore: number; pagesAfter: number; tokens: number[]; logits: Float32Array[] };
}

/** Every audio position on the GPU, no CPU copies. */
export function fullPlan(c: ModelConfig, A: number): PrefillPlan {
  const all = Int32Array.from({ length: A }, (_, i) => i);
  return { heads: Array.from({ length: kvHeadCount(c) }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

/** Decides the plans of one run: the prefill plan, and a plan before any decode step. */
interface Driver {
  prefill(obs: PrefillObservation): PrefillPlan;
  /** The same prefill plan, answered per layer. */
  byLayer?(layout: PolicyLayout): LayerPrefill;
  before(step: number): StepPlan | null;
  after?(step: number, obs: StepObservation): void;
}

/** What a run decided, for the other backend to replay. */
interface Plans {
  prefill: PrefillPlan;
  steps: Map<number, StepPlan>;
}

function replay(p: Plans): Driver {
  return {
    prefill: () => p.prefill,
    byLayer: (layout) =>
      layerwise(
        layout,
        (obs) => p.prefill.heads.slice(obs.layer * layout.numKvHeads, (obs.layer + 1) * layout.numKvHeads),
        undefined,
        // The summary slots are made as the run being replayed made them.
        p.prefill.fitting,
      ),
    before: (s) => p.steps.get(s) ?? null,
  };
}

/** The synthetic plans of 'policy' and 'full' mode. */
function synthetic(pc: ParityCase, A: number): Driver {
  let plan: PrefillPlan;
  return {
    prefill: (obs) => (plan = pc.mode === 'full' ? fullPlan(pc.config, A) : prefillPlan(pc.config, A, obs.scores)),
    byLayer: pc.mode === 'full' ? (layout) => createPolicy('full', { budget: 1 }).prefillByLayer!(layout) : undefined,
    before: (s) => (pc.mode === 'policy' && PLAN_STEPS.includes(s) ? stepPlan(pc.config, A, plan, s) : null),
  };
}

/** A heads file from seeded Voice Scores and Head Sensitivities, calibrated for this clip length. */
function syntheticHeads(c: ModelConfig, A: number, budget: number): HeadsFile {
  const r = rng(99);
  const n = kvHeadCount(c);
  return buildHeadsFile({
    model: c.name,
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: Array.from({ length: n }, () => r()),
    headSensitivity: Array.from({ length: n }, () => 0.1 + r()),
    budgets: [budget],
    clipLengths: [A],
    segmentLength: segmentLength(c),
  });
}

/** Prefill and placement, whole-prompt or per layer: the first token, its logits, the plan and the scores the policy saw. */
async function prefillRun<S extends DecodeSession>(
  b: DecoderBackend<S>,
  pc: ParityCase,
  opts: SessionOptions,
  driver: Driver,
): Promise<{ token: number; logits?: Float32Array; plan: PrefillPlan; scores: Float32Array[]; session: S }> {
  if (!pc.layered) {
    const pre = await b.open(opts).prefill(pc.audio);
    const plan = driver.prefill(pre.observation);
    const session = await pre.place(plan);
    return { token: pre.token, logits: pre.logits, plan, scores: pre.observation.scores, session };
  }
  if (!driver.byLayer) throw new Error(`${pc.name}: no per-layer prefill in ${pc.mode} mode`);
  const inner = driver.byLayer(policyLayout(pc.config, opts.audioLength, pc.prompt));
  const scores: Float32Array[] = [];
  const r = await b.openByLayer(opts).prefill(pc.audio, {
    layer: (obs) => (scores.push(...obs.scores), inner.layer(obs)),
    finish: () => inner.finish(),
    ...(inner.fitting ? { fitting: inner.fitting } : {}),
  });
  return { token: r.token, logits: r.logits, plan: r.plan, scores, session: r.session };
}

async function trace<S extends DecodeSession>(
  b: DecoderBackend<S>,
  pc: ParityCase,
  opts: SessionOptions,
  driver: Driver,
  pipelined = false,
): Promise<Trace & { plans: Plans }> {
  const ctx = b instanceof WebGpuBackend ? b.ctx : null;
  ctx?.resetPeak();
  const baseline = ctx?.liveBytes ?? 0;
  let t = performance.now();
  const pre = await prefillRun(b, pc, opts, driver);
  const prefillMs = performance.now() - t;
  const session: DecodeSession = pre.session;
  const plans: Plans = { prefill: pre.plan, steps: new Map() };
  const info = session instanceof WebGpuDecodeSession ? session.poolLayout() : null;
  const tr: Trace = {
    tokens: [pre.token],
    logits: [pre.logits!],
    weights: [],
    queries: [],
    chunks: [],
    focus: [],
    residency: [],
    rGpu: [session.residency().rGpu],
    prefillScores: pre.scores,
    counters: [],
    ms: { prefill: prefillMs, decode: 0 },
    pool: info ? { shards: info.shards.length, pages: info.capacityPages, bytes: info.bytes } : undefined,
    peakBytes: ctx ? ctx.peakBytes - baseline : undefined,
  };
  const pagesPlaced = session.residency().textPages;
  t = performance.now();
  const before = async (s: number) => {
    const plan = driver.before(s);
    if (plan) {
      plans.steps.set(s, plan);
      await session.apply(plan);
      tr.residency.push(Array.from(session.residency().gpuPerHead).join(','));
      tr.rGpu.push(session.residency().rGpu);
    }
  };
  const record = (s: number, r: StepResult) => {
    driver.after?.(s, r.observation);
    tr.tokens.push(r.token);
    tr.logits.push(r.logits!);
    tr.weights.push(r.observation.weights);
    tr.queries.push(r.observation.queries ?? []);
    tr.chunks.push(Array.from(r.observation.chunks ?? []).join(','));
    tr.focus.push(r.observation.focus ?? NaN);
    tr.counters.push(session.counters());
  };
  if (pipelined) {
    // Step s is queued before step s - 1 is read: only the first token comes from the CPU.
    for (let s = 0; s <= pc.steps; s++) {
      if (s < pc.steps) await before(s);
      session.submit(s === 0 ? tr.tokens[0] : null);
      if (s > 0) record(s - 1, await session.read());
    }
  } else {
    for (let s = 0; s < pc.steps; s++) {
      await before(s);
      record(s, await session.step(tr.tokens[tr.tokens.length - 1]));
    }
  }
  tr.ms.decode = performance.now() - t;
  if (pc.rewind) {
    // A pipelined loop left one step queued past the last read: the rewind drops it.
    const pagesBefore = session.residency().textPages;
    await session.rewind(promptLength(pc.prompt ?? pc.config, opts.audioLength));
    const again = {
      pagesPlaced,
      pagesBefore,
      pagesAfter: session.residency().textPages,
      tokens: [] as number[],
      logits: [] as Float32Array[],
    };
    let token = tr.tokens[0];
    for (let s = 0; s < pc.steps; s++) {
      const r = await session.step(token);
      again.tokens.push((token = r.token));
      again.logits.push(r.logits!);
    }
    tr.rewound = again;
  }
  session.close();
  return { ...tr, plans };
}

function worst(a: Float32Array[][], b: Float32Array[][]): number {
  let m = 0;
  a.forEach((row, i) =>
    row.forEach((x, j) => {
      m = Math.max(m, nmse(x, b[i][j]));
    }),
  );
  return m;
}

export async function runParity(pc: ParityCase): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const c = pc.config;
  const A = pc.audio.length / c.hiddenSize;
  const heads = kvHeadCount(c);
  let request: AttentionRequest = {
    decodeHeads: [...new Set([0, 5 % heads, (Math.floor(heads / 2) + 1) % heads, heads - 1])],
    decodeQueries: true,
    prefillQueries: c.instruction.length,
  };
  let driver = synthetic(pc, A);
  let readouts: Readouts = {};
  if (pc.mode === 'wnw') {
    // The policy decides on the CPU run's observations; it asks for its anchors' weights.
    const policy = createPolicy('wnw', {
      ...pc.policyOptions,
      budget: pc.budget ?? 0.2,
      heads: syntheticHeads(c, A, pc.budget ?? 0.2),
    });
    // Its weights too (it reads only the chunks chosen from them), to compare them across backends.
    // Word timing's focus of the anchors, as a transcription with words asks for it (transcribe/run.ts).
    const own = policy.request(policyLayout(c, A, pc.prompt));
    request = { ...own, ...(pc.chunksOnly ? {} : { decodeQueries: true, decodeWeights: true }) };
    readouts = { focus: own.decodeHeads };
    const next = new Map<number, StepPlan>();
    // The plan from step s applies at step s + planLag (KvPolicy.planLag), on both backends.
    const lag = planLagOf(policy);
    driver = {
      prefill: (obs) => policy.prefill(obs),
      byLayer: (layout) => policy.prefillByLayer!(layout),
      // Step 0 gets the plan made from the prefill (KvPolicy.afterPrefill), as a transcription applies it.
      before: (s) => (s === 0 ? (policy.afterPrefill?.() ?? null) : (next.get(s) ?? null)),
      after: (s, obs) => next.set(s + lag, policy.afterStep(obs)),
    };
  }
  const opts: SessionOptions = {
    audioLength: A,
    maxNewTokens: pc.steps + 2,
    request,
    readouts,
    returnLogits: true,
    ...(pc.prompt ? { prompt: pc.prompt } : {}),
  };
  // The CPU reference stores K/V at the same precision as the GPU pool.
  // ... and computes with the weights the GPU reads (dequantised f16 / q4 matrices).
  const weights =
    pc.streamed?.packed ??
    (pc.prepacked ? packDecoderWeights(c, pc.weights, pc.backend?.weightFormat ?? 'f32') : pc.weights);
  const cpu = new CpuBackend(c, weights, {
    kvPrecision: pc.backend?.kvPrecision,
    weightFormat: pc.backend?.weightFormat,
    kvGrowPages: pc.backend?.kvGrowPages,
  });
  const ref = await trace(cpu, pc, opts, driver);
  const gpuBackend = await WebGpuBackend.create(c, pc.streamed?.source ?? weights, { ...pc.backend, context: ctx });
  const sizes = gpuBackend.memoryNeed(opts, !!pc.layered);
  const blocks = Math.ceil(sizes.promptLength / sizes.prefillChunk);
  // The GPU sizes its session for the session's prompt, not the config's.
  const promptOk = sizes.promptLength === promptLength(pc.prompt ?? c, A);
  const wm = gpuBackend.weightMemory();
  // The GPU run applies the plans made from the CPU's observations: identical plans on both.
  const got = await trace(gpuBackend, pc, opts, replay(ref.plans), pc.pipelined);
  gpuBackend.dispose();
  const shards = got.pool?.shards ?? 0;
  // Per layer, the GPU never holds every layer's prompt K/V: its peak stays under what the
  // whole-prompt path's buffers alone take (every layer's K/V, decode buffers, the pool),
  // and within one layer's prefill buffers, the decode buffers, the pool and one layer's
  // K/V of readback staging (CPU copies), plus 1 MiB of uniforms and gather lists.
  let peak = '';
  let peakOk = true;
  if (pc.layered) {
    const whole = gpuBackend.memoryNeed(opts, false);
    // One layer's prompt K and V, in the pool's precision as the prefill holds them.
    const layerKv = 2 * sizes.kvElementBytes * sizes.promptLength * c.numKvHeads * c.headDim;
    // Per layer held, besides its K/V: the instruction rows' queries (summary slots fitted to them).
    const layerQ = 4 * sizes.instructionQueryRows * c.numHeads * c.headDim;
    const pool = got.pool?.bytes ?? 0;
    const upper = sizes.prefillBytes + sizes.decodeBytes + pool + layerKv + 2 ** 20;
    const wholeFloor = whole.prefillBytes + whole.decodeBytes + pool;
    const p = got.peakBytes ?? Infinity;
    peakOk =
      p <= upper &&
      p < wholeFloor &&
      sizes.prefillBytes === whole.prefillBytes - (c.numLayers - 1) * (layerKv + layerQ);
    peak = ` GPU peak ${p} bytes above the weights (per-layer bound ${upper}; the whole-prompt path's buffers alone ${wholeFloor}, one layer's prompt K/V ${layerKv})${peakOk ? '' : ' (PEAK OUT OF BOUNDS)'};`;
  }
  const layoutOk =
    (!pc.layout || (shards >= pc.layout.minShards && blocks === pc.layout.prefillBlocks)) &&
    (!pc.weightParts || (wm.embedParts >= pc.weightParts.embed && wm.lmHeadParts >= pc.weightParts.lmHead));
  const firstDiff = ref.tokens.findIndex((t, i) => got.tokens[i] !== t);
  const logitsNmse = worst([ref.logits], [got.logits]);
  const weightsNmse = worst(ref.weights, got.weights);
  const queriesNmse = worst(ref.queries, got.queries);
  const scoresNmse = worst([ref.prefillScores], [got.prefillScores]);
  const sameResidency = ref.residency.join('|') === got.residency.join('|');
  // WnW: the chunks chunk_select chose on the GPU are those the CPU's reference chose, every step.
  const sameChunks =
    ref.chunks.join('|') === got.chunks.join('|') && (pc.mode !== 'wnw' || got.chunks.every((x) => x.length > 0));
  // WnW: the focus that dates each token, the GPU's top four against the CPU's focusOf. The
  // exported weights agree to f32 rounding, not bit for bit (sums in another order), which can
  // move a centre by a few thousandths of a position (7.7e-3 measured with the f16 pool); the
  // bound is under half a word time's rounding (0.01 s: 0.125 positions at 12.5 audio tokens a
  // second). focus.wgsl against focusOf on the same weights, bit for bit: e2e/kernels.spec.ts.
  const focusAt = ref.focus.reduce(
    (k, f, i) => (Math.abs(f - got.focus[i]) > Math.abs(ref.focus[k] - got.focus[k]) ? i : k),
    0,
  );
  const focusDiff = ref.focus.length ? Math.abs(ref.focus[focusAt] - got.focus[focusAt]) : 0;
  const sameFocus = pc.mode !== 'wnw' || (focusDiff < 0.05 && got.focus.every((f) => f >= 0));
  const rGpu = `r_GPU after prefill ${got.rGpu[0].toFixed(3)}, mean ${(got.rGpu.reduce((a, b) => a + b, 0) / got.rGpu.length).toFixed(3)} over ${got.rGpu.length} plans`;
  const c1 = got.counters[1];
  const cN = got.counters[got.counters.length - 1];
  // Bind groups are made once per pool shape: anew only at a step where the pool grew.
  const constant = got.counters
    .slice(1)
    .every(
      (k, i) =>
        k.buffers === c1.buffers &&
        k.submits === 1 &&
        k.dispatches === c1.dispatches &&
        (k.poolGrowths !== got.counters[i].poolGrowths || k.bindGroups === got.counters[i].bindGroups),
    );
  // Pipelined: no read waited on an idle GPU (a step was always queued behind it), and the
  // readback carried what the session asked for; the waiting loop waits at every step.
  const waits = got.counters.reduce((a, k) => a + (k.cpuWaits ?? NaN), 0);
  const waitsOk =
    waits === (pc.pipelined ? 0 : pc.steps) && got.counters.every((k) => k.readbackBytes === sizes.readbackBytes - 12);
  const growths = cN.poolGrowths;
  const growthOk = growths === ref.counters[ref.counters.length - 1].poolGrowths && growths >= (pc.minGrowths ?? 0);
  let golden = '';
  let goldenOk = true;
  if (pc.golden) {
    const g = pc.golden;
    const V = c.vocabSize;
    const n = pc.mode === 'full' ? Math.min(g.tokens.length, ref.tokens.length) : 1;
    const cpuG = ref.tokens.slice(0, n).every((t, i) => t === g.tokens[i]);
    const gpuG = got.tokens.slice(0, n).every((t, i) => t === g.tokens[i]);
    let lg = 0;
    if (g.logits) {
      for (let i = 0; i < n && (i + 1) * V <= g.logits.length; i++) {
        const gl = g.logits.subarray(i * V, (i + 1) * V);
        lg = Math.max(lg, nmse(gl, ref.logits[i]), nmse(gl, got.logits[i]));
      }
    }
    goldenOk = cpuG && gpuG && lg < 1e-5;
    golden = ` golden (${n} steps, full cache): tokens cpu ${cpuG ? 'match' : 'DIFFER'}, gpu ${gpuG ? 'match' : 'DIFFER'}, logits nmse ${lg.toExponential(2)};`;
  }
  let rewind = '';
  let rewindOk = true;
  if (pc.rewind) {
    const a = ref.rewound!;
    const b = got.rewound!;
    const same = a.tokens.every((t, i) => b.tokens[i] === t);
    const repeats = pc.mode !== 'full' || b.tokens.every((t, i) => t === got.tokens[i + 1]);
    const nm = worst([a.logits], [b.logits]);
    // The steps took text pages of their own (the case decodes past the prompt's last page), and gave them back.
    const pagesBack = a.pagesAfter === a.pagesPlaced && b.pagesAfter === b.pagesPlaced && b.pagesBefore > b.pagesPlaced;
    rewindOk = same && repeats && nm < 1e-6 && pagesBack;
    rewind = ` rewound to the prompt's end: text pages ${b.pagesPlaced} placed, ${b.pagesBefore} before, ${b.pagesAfter} after (cpu ${a.pagesPlaced}, ${a.pagesBefore}, ${a.pagesAfter}); ${pc.steps} steps again, tokens ${same ? 'identical' : 'DIFFER'} across backends${pc.mode === 'full' ? `, ${repeats ? 'repeat' : 'DO NOT REPEAT'} the first pass` : ''}, logits nmse ${nm.toExponential(2)};`;
  }
  const pass =
    rewindOk &&
    promptOk &&
    growthOk &&
    peakOk &&
    layoutOk &&
    firstDiff === -1 &&
    logitsNmse < 1e-6 &&
    weightsNmse < 5e-4 &&
    queriesNmse < 1e-6 &&
    scoresNmse < 5e-4 &&
    sameResidency &&
    sameChunks &&
    sameFocus &&
    constant &&
    goldenOk &&
    waitsOk;
  const detail =
    `${pc.name} (${pc.mode} plan): audio ${A}, ${pc.steps} steps, pool ${got.pool?.pages} pages (worst plan ${sizes.worstPoolPages}) in ${shards} shards, prefill blocks ${blocks}${promptOk ? '' : ` (PROMPT NOT THE SESSION'S: ${sizes.promptLength} rows)`}, weights ${pc.backend?.weightFormat ?? 'f32'} ${wm.total} bytes (${JSON.stringify(wm.byFormat)}; embedding in ${wm.embedParts} bindings, lm_head in ${wm.lmHeadParts})${layoutOk ? '' : ` (WANTED ${JSON.stringify({ ...pc.layout, ...pc.weightParts })})`}, tokens ${firstDiff === -1 ? 'identical' : `differ from step ${firstDiff} (cpu ${ref.tokens.slice(firstDiff, firstDiff + 4)} gpu ${got.tokens.slice(firstDiff, firstDiff + 4)})`};` +
    `${golden}${rewind} logits nmse ${logitsNmse.toExponential(2)}, exported weights ${weightsNmse.toExponential(2)}, queries ${queriesNmse.toExponential(2)}, prefill scores ${scoresNmse.toExponential(2)};` +
    `${pc.mode === 'wnw' ? ` chunks chosen ${sameChunks ? 'equal' : 'DIFFER'} (step 0: ${got.chunks[0]}); focus ${sameFocus ? 'equal' : 'DIFFERS'} (largest difference ${focusDiff.toExponential(2)} positions, at step ${focusAt}: CPU ${ref.focus[focusAt]?.toFixed(4)}, GPU ${got.focus[focusAt]?.toFixed(4)});` : ''}` +
    ` residency after plans ${sameResidency ? 'equal' : 'DIFFERS'} (${got.residency.length} plans; ${rGpu});${peak}` +
    ` counters constant ${constant} (dispatches ${cN.dispatches}, submits ${cN.submits}, buffers ${cN.buffers}, bindGroups ${cN.bindGroups});` +
    ` ${pc.pipelined ? 'pipelined' : 'waiting'} loop: CPU waits on the critical path ${waits} in ${pc.steps} steps, readback ${cN.readbackBytes} bytes/step, CPU→GPU ${cN.bytesToGpu} bytes last step${waitsOk ? '' : ' (WAITS OR READBACK NOT AS EXPECTED)'}; pool grew ${growths} times for the text (cpu ${ref.counters[ref.counters.length - 1].poolGrowths}${growthOk ? '' : `, WANTED equal and >= ${pc.minGrowths ?? 0}`});` +
    ` cpu prefill ${Math.round(ref.ms.prefill)} ms decode ${Math.round(ref.ms.decode / pc.steps)} ms/tok; gpu prefill ${Math.round(got.ms.prefill)} ms decode ${Math.round(got.ms.decode / pc.steps)} ms/tok`;
  return { name: pc.name, pass, detail, ms: performance.now() - t0 };
}
