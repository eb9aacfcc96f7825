/**
 * Whole-decoder parity: WebGpuBackend against CpuBackend, greedy tokens identical after a
 * long prefill, with one policy-like plan applied to both (different subsets per head,
 * CPU mirrors, offloaded and dropped positions) and recall/release plans mid-decode.
 * A case is (config, weights, audio embeddings, optional golden tokens/logits), so the
 * shipped model's fixtures plug in as another case.
 */
import { kvHeadCount, segmentLength, type ModelConfig } from '../../src/model/config.js';
import type { DecoderWeights } from '../../src/model/weights.js';
import type { DecoderBackend, SessionOptions } from '../../src/backend/types.js';
import type { PrefillPlan, StepPlan } from '../../src/policy/types.js';
import { CpuBackend } from '../../src/backend/cpu/backend.js';
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
   * pool); 'full': every audio position stays on the GPU (what golden fixtures assume).
   */
  mode: 'policy' | 'full';
  /**
   * Golden greedy tokens / logits [steps, vocab] from the training code (step 0 = after the
   * prompt), full cache. In 'policy' mode only step 0 (before any plan) is compared.
   */
  golden?: { tokens: Int32Array; logits?: Float32Array };
  /** Options of the GPU backend (e.g. a binding cap that shards the pool). */
  backend?: Omit<WebGpuBackendOptions, 'context'>;
  /** Pool shards (at least) and prefill row blocks the GPU session must use. */
  layout?: { minShards: number; prefillBlocks: number };
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
    if (h % 2 === 0) out.release.push({ head: h, positions: Int32Array.from({ length: P }, (_, i) => rel * P + i).filter((p) => p < A) });
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
  residency: string[];
  prefillScores: Float32Array[];
  counters: ReturnType<DecoderBackend['stepCounters']>[];
  ms: { prefill: number; decode: number };
  /** WebGPU: the pool the plan made (shards, pages). */
  pool?: { shards: number; pages: number };
}

/** Every audio position on the GPU, no CPU copies. */
export function fullPlan(c: ModelConfig, A: number): PrefillPlan {
  const all = Int32Array.from({ length: A }, (_, i) => i);
  return { heads: Array.from({ length: kvHeadCount(c) }, () => ({ gpu: all, cpu: new Int32Array(0) })) };
}

async function trace(b: DecoderBackend, pc: ParityCase, opts: SessionOptions, plan: (scores: Float32Array[]) => PrefillPlan): Promise<Trace & { plan: PrefillPlan }> {
  const A = opts.audioLength;
  b.begin(opts);
  let t = performance.now();
  const pre = await b.prefill(pc.audio);
  const prefillMs = performance.now() - t;
  const p = plan(pre.observation.scores);
  await b.applyPrefill(p);
  const info = b instanceof WebGpuBackend ? b.poolInfo() : null;
  const tr: Trace = { tokens: [pre.token], logits: [pre.logits!], weights: [], queries: [], residency: [], prefillScores: pre.observation.scores, counters: [], ms: { prefill: prefillMs, decode: 0 }, pool: info ? { shards: info.shards.length, pages: info.capacityPages } : undefined };
  t = performance.now();
  for (let s = 0; s < pc.steps; s++) {
    if (pc.mode === 'policy' && PLAN_STEPS.includes(s)) {
      await b.apply(stepPlan(pc.config, A, p, s));
      tr.residency.push(Array.from(b.residency().gpuPerHead).join(','));
    }
    const r = await b.step(tr.tokens[tr.tokens.length - 1]);
    tr.tokens.push(r.token);
    tr.logits.push(r.logits!);
    tr.weights.push(r.observation.weights);
    tr.queries.push(r.observation.queries ?? []);
    tr.counters.push(b.stepCounters());
  }
  tr.ms.decode = performance.now() - t;
  b.end();
  return { ...tr, plan: p };
}

function worst(a: Float32Array[][], b: Float32Array[][]): number {
  let m = 0;
  a.forEach((row, i) => row.forEach((x, j) => { m = Math.max(m, nmse(x, b[i][j])); }));
  return m;
}

export async function runParity(pc: ParityCase): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const c = pc.config;
  const A = pc.audio.length / c.hiddenSize;
  const heads = kvHeadCount(c);
  const request = { decodeHeads: [0, 5, Math.floor(heads / 2) + 1, heads - 1], decodeQueries: true, prefillQueries: c.instruction.length };
  const opts: SessionOptions = { audioLength: A, maxNewTokens: pc.steps + 2, request, returnLogits: true };
  // The CPU reference stores K/V at the same precision as the GPU pool.
  const cpu = new CpuBackend(c, pc.weights, { kvPrecision: pc.backend?.kvPrecision });
  const ref = await trace(cpu, pc, opts, (s) => (pc.mode === 'full' ? fullPlan(c, A) : prefillPlan(c, A, s)));
  const gpuBackend = await WebGpuBackend.create(c, pc.weights, { ...pc.backend, context: ctx });
  const sizes = gpuBackend.plan(opts);
  const blocks = Math.ceil(sizes.promptLength / sizes.prefillChunk);
  // The GPU run applies the plan made from the CPU's scores: identical plans on both.
  const got = await trace(gpuBackend, pc, opts, () => ref.plan);
  gpuBackend.dispose();
  const shards = got.pool?.shards ?? 0;
  const layoutOk = !pc.layout || (shards >= pc.layout.minShards && blocks === pc.layout.prefillBlocks);
  const firstDiff = ref.tokens.findIndex((t, i) => got.tokens[i] !== t);
  const logitsNmse = worst([ref.logits], [got.logits]);
  const weightsNmse = worst(ref.weights, got.weights);
  const queriesNmse = worst(ref.queries, got.queries);
  const scoresNmse = worst([ref.prefillScores], [got.prefillScores]);
  const sameResidency = ref.residency.join('|') === got.residency.join('|');
  const c1 = got.counters[1];
  const cN = got.counters[got.counters.length - 1];
  const constant = got.counters.slice(1).every((k) => k.buffers === c1.buffers && k.bindGroups === c1.bindGroups && k.submits === 1 && k.dispatches === c1.dispatches);
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
  const pass = layoutOk && firstDiff === -1 && logitsNmse < 1e-6 && weightsNmse < 5e-4 && queriesNmse < 1e-6 && scoresNmse < 5e-4 && sameResidency && constant && goldenOk;
  const detail = `${pc.name} (${pc.mode} plan): audio ${A}, ${pc.steps} steps, pool ${got.pool?.pages} pages (worst plan ${sizes.worstPoolPages}) in ${shards} shards, prefill blocks ${blocks}${layoutOk ? '' : ` (WANTED ${JSON.stringify(pc.layout)})`}, tokens ${firstDiff === -1 ? 'identical' : `differ from step ${firstDiff} (cpu ${ref.tokens.slice(firstDiff, firstDiff + 4)} gpu ${got.tokens.slice(firstDiff, firstDiff + 4)})`};` +
    `${golden} logits nmse ${logitsNmse.toExponential(2)}, exported weights ${weightsNmse.toExponential(2)}, queries ${queriesNmse.toExponential(2)}, prefill scores ${scoresNmse.toExponential(2)};` +
    ` residency after plans ${sameResidency ? 'equal' : 'DIFFERS'} (${got.residency.length} plans);` +
    ` counters constant ${constant} (dispatches ${cN.dispatches}, submits ${cN.submits}, buffers ${cN.buffers}, bindGroups ${cN.bindGroups});` +
    ` cpu prefill ${Math.round(ref.ms.prefill)} ms decode ${Math.round(ref.ms.decode / pc.steps)} ms/tok; gpu prefill ${Math.round(got.ms.prefill)} ms decode ${Math.round(got.ms.decode / pc.steps)} ms/tok`;
  return { name: pc.name, pass, detail, ms: performance.now() - t0 };
}
