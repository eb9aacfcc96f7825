/**
 * The decoder-level checks gpu.html exposes: parity cases (random reference model now,
 * the shipped model's golden fixtures when they exist), per-step resource counters,
 * and the context-too-long error.
 */
import { ContextTooLongError } from '../../src/errors.js';
import { kvHeadCount, parseConfig } from '../../src/model/config.js';
import {
  decoderShapeConfig,
  referenceConfig,
  randomDecoderWeights,
  randomEmbeddings,
  type DecoderShape,
} from '../../src/model/testing.js';
import { loadDecoderWeights } from '../../src/model/weights.js';
import { SafeTensors } from '../../src/model/safetensors.js';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.js';
import type { WeightFormat } from '../../src/model/quant.js';
import { benchWebGpu } from '../../src/backend/webgpu/bench.js';
import { forEvaluation } from '../../src/policy/registry.js';
import { runParity, type ParityCase } from './gpu-decoder.js';
import { gpu, type CheckResult } from './gpu-util.js';
import { syntheticHeads } from '../../src/bench/decode.js';
import { HOST_POLICIES, hostTimePolicy } from '../../src/bench/host.js';
import { StepProbe } from '../../src/bench/step-probe.js';

function randomCase(name: string, audioLength: number, steps: number): ParityCase {
  const config = referenceConfig();
  return {
    name,
    config,
    weights: randomDecoderWeights(config, 1),
    audio: randomEmbeddings(config, audioLength, 2),
    steps,
    mode: 'policy',
  };
}

/**
 * The decoder shapes of the real backbones in miniature (head_dim ≠ hidden/heads, GQA
 * 16:2, MHA, q/k/v biases, multi-token prefixes): 300 audio tokens, 64 steps.
 */
function shapeCase(shape: DecoderShape, mode: 'full' | 'wnw'): ParityCase {
  const config = decoderShapeConfig(shape);
  const name = `${config.name} decoder, ${mode === 'full' ? 'full cache' : 'WnW at r_GPU 0.2'}`;
  return {
    name,
    config,
    weights: randomDecoderWeights(config, 11),
    audio: randomEmbeddings(config, 300, 12),
    steps: 64,
    mode,
    budget: 0.2,
  };
}

/**
 * The Voxtral-shaped decoder with f16 or q4 weights: the GPU uploads the packed matrices
 * (embedding and lm_head included), the CPU decodes with their dequantised values, and
 * greedy tokens must agree for 64 steps. `split`: a 24,576-entry vocabulary under a 1 MiB
 * binding cap, so the embedding table and the lm_head (1.5 MB each in q4) run as two row
 * parts; an instruction token of the second part makes the prefill gather from it too.
 */
function formatCase(format: WeightFormat, mode: 'full' | 'wnw', split = false): ParityCase {
  const shape = decoderShapeConfig('voxtral');
  const config = split
    ? { ...shape, name: `${shape.name}, vocab 24576`, vocabSize: 24576, instruction: [4, 300, 20001, 34] }
    : shape;
  const what = mode === 'full' ? 'full cache' : 'WnW at r_GPU 0.2';
  return {
    name: `${config.name} decoder, ${format} weights${split ? ' split across bindings' : ''}, ${what}`,
    config,
    weights: randomDecoderWeights(config, 11),
    audio: randomEmbeddings(config, 300, 12),
    steps: 64,
    mode,
    budget: 0.2,
    backend: { weightFormat: format, ...(split ? { maxBindingBytes: 2 ** 20 } : {}) },
    ...(split ? { weightParts: { embed: 2, lmHead: 2 } } : {}),
  };
}

const SHIPPED = '/models/wnw-ref';

/** The shipped model and one golden clip, or null while they are not there yet. */
async function shippedCase(clip: number, mode: ParityCase['mode']): Promise<ParityCase | null> {
  const get = async (f: string) => {
    const r = await fetch(`${SHIPPED}/${f}`);
    return r.ok && !(r.headers.get('content-type') ?? '').includes('text/html') ? r : null;
  };
  const [cfgR, wR, fxR] = await Promise.all([
    get('config.json'),
    get('decoder.safetensors'),
    get(`fixtures/clip${clip}.safetensors`),
  ]);
  if (!cfgR || !wR || !fxR) return null;
  const config = parseConfig(await cfgR.json(), `${SHIPPED}/config.json`);
  const weights = loadDecoderWeights(config, await wR.arrayBuffer(), `${SHIPPED}/decoder.safetensors`);
  const fx = new SafeTensors(await fxR.arrayBuffer(), `clip${clip}.safetensors`);
  const tokens = fx.i32('tokens');
  const audio = fx.f32('embeddings');
  // The fixture's prompt must be our layout: [prefix][audio (-1)][instruction].
  const prompt = Array.from(fx.i32('prompt'));
  const A = audio.length / config.hiddenSize;
  const ours = [...config.prefix, ...new Array<number>(A).fill(-1), ...config.instruction];
  if (prompt.join(',') !== ours.join(','))
    throw new Error(
      `clip${clip}: fixture prompt layout differs from [prefix ${config.prefix}][audio x ${A}][instruction]`,
    );
  return {
    name: `shipped clip${clip}`,
    config,
    weights,
    audio,
    steps: 64,
    mode,
    golden: { tokens, logits: fx.f32('logits') },
  };
}

async function parityOf(make: () => Promise<ParityCase | null>, name: string): Promise<CheckResult> {
  const pc = await make();
  if (!pc) return { name, pass: true, detail: 'SKIP: model or fixture not present', ms: 0 };
  return runParity(pc);
}

/** Resource counters across steps of a session with exports, recalls and releases. */
async function contextTooLong(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const config = referenceConfig();
  // A 64 MiB binding cap: 90 minutes of prompt queries (143 MB) cannot be bound.
  const b = await WebGpuBackend.create(config, randomDecoderWeights(config, 3), {
    context: ctx,
    kvMaxBytes: 2 ** 20,
    maxBindingBytes: 64 * 2 ** 20,
  });
  const before = ctx.liveBuffers;
  const request = { decodeHeads: [], prefillQueries: 3 };
  let err: unknown = null;
  try {
    // 90 minutes of audio: refused before any buffer is made.
    b.open({ audioLength: 70_000, maxNewTokens: 10, request });
  } catch (e) {
    err = e;
  }
  const tooLong = err instanceof ContextTooLongError && err.neededBytes > 0 && err.limit === 'prompt-binding';
  const created = ctx.liveBuffers - before;
  // Over the budget at the placement: a full plan for 300 tokens in 32 heads needs ~2.7 MiB.
  let err2: unknown = null;
  const A = 300;
  const stage = b.open({ audioLength: A, maxNewTokens: 4, request });
  try {
    const all = Int32Array.from({ length: A }, (_, i) => i);
    const pre = await stage.prefill(randomEmbeddings(config, A, 4));
    await pre.place({
      heads: Array.from({ length: kvHeadCount(config) }, () => ({ gpu: all, cpu: new Int32Array(0) })),
    });
  } catch (e) {
    err2 = e;
  }
  b.dispose();
  const budget = err2 instanceof ContextTooLongError;
  const pass = tooLong && created === 0 && budget;
  const detail = `open(70k tokens): ${tooLong ? 'ContextTooLongError' : String(err)} (${(err as Error)?.message ?? ''}); buffers created before the error: ${created}; full plan over a 1 MiB budget: ${budget ? 'ContextTooLongError' : String(err2)} (${(err2 as Error)?.message ?? ''})`;
  return { name: 'context_too_long', pass, detail, ms: performance.now() - t0 };
}

/** The bench entry the CLI calls, on a short clip: it runs and reports sane numbers. */
async function benchSmoke(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const config = referenceConfig();
  const r = await benchWebGpu(config, randomDecoderWeights(config, 5), 200, { context: ctx, steps: 6 });
  const pass =
    r.submitsPerStep === 1 &&
    // The appended slots' positions, the embedding, 8 a layer, the norm, lm_head and argmax.
    r.dispatchesPerStep === 2 + 8 * config.numLayers + 3 &&
    r.decodeMsPerToken > 0 &&
    r.prefillTokensPerSecond > 0;
  return { name: 'bench_smoke', pass, detail: JSON.stringify(r), ms: performance.now() - t0 };
}

/**
 * What a decode step asks of the device, counted by wrapping it (src/bench/step-probe.ts),
 * over steady steps of the Voxtral-shaped decoder (2,000 audio tokens) under the full
 * cache, WnW at 0.2 and Quest at 0.2: no buffer and no bind group made, one map for the
 * readback and at most one more, the staged rows' upload mapped again. The full cache and
 * WnW write at most the step's uniforms and the token (a waiting loop): positions, page
 * tables and recalled rows ride the mapped upload, however many KV heads the step appends
 * to, WnW's recalls included (the bench's anchors' attention moves on each step:
 * src/bench/host.ts `syntheticRows`); Quest's recalls (a few thousand rows a step) may pass
 * the upload's capacity and be written directly, so its writes are not bounded here.
 */
async function stepCalls(): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const config = decoderShapeConfig('voxtral');
  const b = await WebGpuBackend.create(config, randomDecoderWeights(config, 13), { context: ctx });
  const run = {
    config,
    heads: syntheticHeads(config, 375),
    minutes: [],
    steps: 12,
    weightBytesPerStep: 1,
    bandwidthGBs: 1,
    policies: HOST_POLICIES,
  };
  const probe = new StepProbe(ctx.device);
  const details: string[] = [];
  let pass = true;
  try {
    for (const [name, budget] of HOST_POLICIES) {
      const r = await hostTimePolicy(b, probe, run, 2000 / (60 * config.audio.tokensPerSecond), name, budget);
      const c = r.callsPerStep;
      const ok =
        c.createBuffer === 0 &&
        c.createBindGroup === 0 &&
        c.mapAsync >= 1 &&
        c.mapAsync <= 2 &&
        (name === 'quest' || c.writeBuffer <= (r.loop === 'waiting' ? 2 : 1));
      pass &&= ok;
      details.push(
        `${name}@${budget} (${r.loop}, ${r.recalledPerStep.toFixed(0)} recalled a step): ${JSON.stringify(c)}`,
      );
    }
  } finally {
    probe.detach();
    b.dispose();
  }
  return { name: 'step_calls', pass, detail: details.join('; '), ms: performance.now() - t0 };
}

export const decoderTests: Record<string, () => Promise<CheckResult>> = {
  parity_quick: () => runParity(randomCase('random reference model (quick)', 150, 12)),
  parity_reference_random: () => runParity(randomCase('random reference model', 1024, 64)),
  // A 2.5 MiB binding cap (the prompt's queries take 2.1 MB): the plan's K pages, about
  // 1.5 MB per layer, need a K/V pair per layer or two, and the prefill's QKV and MLP run
  // in two row blocks; the same plans as above.
  parity_sharded_pool: () =>
    runParity({
      ...randomCase('random reference model, sharded pool, prefill in blocks', 1024, 64),
      backend: { maxBindingBytes: 2.5 * 2 ** 20 },
      layout: { minShards: 3, prefillBlocks: 2 },
    }),
  // An f16 pool on both backends (the CPU rounds what it stores as the GPU packs it).
  parity_f16_pool: () =>
    runParity({ ...randomCase('random reference model, f16 KV pool', 1024, 64), backend: { kvPrecision: 'f16' } }),
  // clip1: full cache, both backends against the golden tokens and logits;
  // clip2: the policy-like plans on the real model (golden only before the first plan).
  parity_shipped_clip1: () => parityOf(() => shippedCase(1, 'full'), 'parity_shipped_clip1'),
  parity_shipped_clip2: () => parityOf(() => shippedCase(2, 'policy'), 'parity_shipped_clip2'),
  parity_voxtral_shape_full: () => runParity(shapeCase('voxtral', 'full')),
  parity_voxtral_shape_wnw: () => runParity(shapeCase('voxtral', 'wnw')),
  // Per-layer prefill: each layer's plan placed before the next layer runs, one layer's
  // prompt K/V at a time; WnW's CPU copies read back per layer.
  parity_voxtral_shape_wnw_layered: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, per-layer prefill',
      layered: true,
    }),
  // Another language's prompt in the session options (longer prefix and instruction), the config's left as it is.
  parity_voxtral_shape_wnw_prompt: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, per-layer prefill, a session prompt',
      layered: true,
      prompt: { prefix: [...decoderShapeConfig('voxtral').prefix, 9], instruction: [4, 21, 22, 23, 34] },
    }),
  // The same per-layer case with an f16 pool: the prefill's K/V are f16 on both backends, and the CPU copies and summaries are read back from them.
  // Half the mass correction in every layer: the slots' counts come from the same CPU-side fit on both backends.
  parity_voxtral_shape_wnw_summary_mass: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, per-layer prefill, summaryMass 0.5',
      layered: true,
      policyOptions: forEvaluation('wnw', { summaryMass: 0.5 }),
    }),
  parity_voxtral_shape_wnw_layered_f16: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, per-layer prefill, f16 pool',
      layered: true,
      backend: { kvPrecision: 'f16' },
    }),
  // The full cache per layer on a long prompt in two row blocks under a 2.5 MiB binding cap.
  parity_reference_full_layered: () =>
    runParity({
      ...randomCase('random reference model, full cache, per-layer prefill in blocks', 1024, 32),
      mode: 'full',
      layered: true,
      backend: { maxBindingBytes: 2.5 * 2 ** 20 },
      layout: { minShards: 4, prefillBlocks: 2 },
    }),
  parity_qwen2_5_omni_shape_full: () => runParity(shapeCase('qwen2_5_omni', 'full')),
  parity_qwen2_5_omni_shape_wnw: () => runParity(shapeCase('qwen2_5_omni', 'wnw')),
  parity_qwen2_audio_shape_full: () => runParity(shapeCase('qwen2_audio', 'full')),
  parity_qwen2_audio_shape_wnw: () => runParity(shapeCase('qwen2_audio', 'wnw')),
  parity_voxtral_shape_f16_full: () => runParity(formatCase('f16', 'full')),
  parity_voxtral_shape_f16_wnw: () => runParity(formatCase('f16', 'wnw')),
  parity_voxtral_shape_q4_full: () => runParity(formatCase('q4', 'full')),
  parity_voxtral_shape_q4_wnw: () => runParity(formatCase('q4', 'wnw')),
  // The weights handed over packed (what a folder from `wnw convert` loads as).
  parity_voxtral_shape_q4_prepacked: () =>
    runParity({
      ...formatCase('q4', 'full'),
      name: 'voxtral-shaped decoder, q4 weights given packed, full cache',
      prepacked: true,
    }),
  // Qwen2-Audio-shaped with q4: down_proj's K (176) is no multiple of 32, so it is stored
  // f16 (both formats' pipelines in one model), and the q4 Wqkv carries biases.
  parity_qwen2_audio_shape_q4_wnw: () =>
    runParity({
      ...shapeCase('qwen2_audio', 'wnw'),
      name: 'qwen2-audio-shaped decoder, q4 weights (down_proj f16), WnW at r_GPU 0.2',
      backend: { weightFormat: 'q4' },
    }),
  parity_q4_split_head_full: () => runParity(formatCase('q4', 'full', true)),
  parity_q4_split_head_wnw: () => runParity(formatCase('q4', 'wnw', true)),
  // q4 weights with the per-layer prefill (each layer's plan placed before the next runs).
  parity_q4_split_head_wnw_layered: () =>
    runParity({
      ...formatCase('q4', 'wnw', true),
      name: 'voxtral-shaped, vocab 24576 decoder, q4 weights split across bindings, WnW at r_GPU 0.2, per-layer prefill',
      layered: true,
    }),
  // Text KV on demand: a pool that grows one page per head at a time, so 60 tokens outgrow
  // the prompt's text page twice; the grown pool (new buffers, copied pages, remade bind
  // groups) must decode the CPU's tokens, per layer on the Voxtral shape with an f16 pool.
  parity_text_growth: () =>
    runParity({
      ...shapeCase('voxtral', 'full'),
      name: 'voxtral-shaped decoder, full cache per layer, f16 pool grown for the text every page',
      audio: randomEmbeddings(decoderShapeConfig('voxtral'), 100, 12),
      steps: 60,
      layered: true,
      backend: { kvPrecision: 'f16', kvGrowPages: 1 },
      minGrowths: 2,
    }),
  // The pipelined loop (the token stays on the GPU, step t + 1 queued before step t is read):
  // the policy-like recall/release plans mid-decode, the full cache on the Voxtral shape, and
  // WnW with its plans two steps late (planLag 2), each against the CPU's waiting loop.
  parity_pipelined_policy: () =>
    runParity({ ...randomCase('random reference model, pipelined', 1024, 64), pipelined: true }),
  parity_pipelined_voxtral_full: () =>
    runParity({
      ...shapeCase('voxtral', 'full'),
      name: 'voxtral-shaped decoder, full cache, pipelined',
      pipelined: true,
    }),
  parity_pipelined_voxtral_wnw_lag2: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, plans two steps late, pipelined',
      pipelined: true,
      policyOptions: { planLag: 2 },
    }),
  // A recording's next request: the text rewound to the end of the prompt, its pages (grown
  // for it one at a time) back to the pool, the queued step past the last read dropped.
  parity_rewind_pipelined_full: () =>
    runParity({
      ...shapeCase('voxtral', 'full'),
      name: 'voxtral-shaped decoder, full cache, pipelined, f16 pool grown for the text, rewound',
      audio: randomEmbeddings(decoderShapeConfig('voxtral'), 100, 12),
      steps: 40,
      pipelined: true,
      backend: { kvPrecision: 'f16', kvGrowPages: 1 },
      rewind: true,
    }),
  parity_rewind_wnw: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, rewound',
      rewind: true,
    }),
  // WnW's own request: the readback is the token and the chunk indices (16 bytes a step here).
  parity_voxtral_wnw_chunks_only: () =>
    runParity({
      ...shapeCase('voxtral', 'wnw'),
      name: 'voxtral-shaped decoder, WnW at r_GPU 0.2, only chunks read back',
      chunksOnly: true,
    }),
  context_too_long: contextTooLong,
  bench_smoke: benchSmoke,
  step_calls: stepCalls,
};
