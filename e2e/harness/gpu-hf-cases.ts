/**
 * The Hugging Face miniatures (training/hf/miniatures.py) decoded on WebGPU against the CPU
 * backend: each folder is loaded in the page by `loadModel(url)` exactly as a user's
 * download would be (config, tokenizer and prompt, then the shards' tensors through HTTP
 * Range requests), and both backends run 64 greedy steps after 300 random audio
 * embeddings, under the full cache and under WnW at r_GPU 0.2.
 * The page is opened as gpu.html?hf=<URL path of the folder holding the miniatures>.
 */
import { loadModel, type LoadedModel } from '../../src/model/loader.js';
import { joinModelPath } from '../../src/model/files.js';
import { kvHeadCount } from '../../src/model/config.js';
import { randomEmbeddings } from '../../src/model/testing.js';
import { runParity } from './gpu-decoder.js';
import type { CheckResult } from './gpu-util.js';
import { triageMemory, triageParity } from './gpu-triage.js';
import { loadTranscriber } from '../../src/index.js';
import { siteClips } from './site-clips.js';

const FAMILIES = ['voxtral', 'qwen2_audio', 'qwen2_5_omni'] as const;
type Family = (typeof FAMILIES)[number];

const AUDIO_TOKENS = 300;
const STEPS = 64;

/** One model at a time: both modes of a family run back to back, and the f32 weights are large. */
let loaded: { family: Family; model: Promise<{ model: LoadedModel; ms: number }> } | null = null;

function load(family: Family, root: string): Promise<{ model: LoadedModel; ms: number }> {
  if (loaded?.family !== family) {
    const t0 = performance.now();
    loaded = {
      family,
      model: loadModel(joinModelPath(root, family)).then((model) => ({ model, ms: performance.now() - t0 })),
    };
  }
  return loaded.model;
}

async function hfParity(family: Family, mode: 'full' | 'wnw'): Promise<CheckResult> {
  const name = `parity_hf_${family}_${mode}`;
  const root = new URLSearchParams(location.search).get('hf');
  if (!root)
    return {
      name,
      pass: false,
      detail:
        'no miniatures folder: open the page as gpu.html?hf=<URL path of the miniatures> (e2e/hf-parity.spec.ts does)',
      ms: 0,
    };
  const t0 = performance.now();
  const { model, ms } = await load(family, root);
  const c = model.config;
  const shape =
    `vocab ${c.vocabSize}, hidden ${c.hiddenSize}, ${c.numLayers} layers, ${c.numHeads}:${c.numKvHeads} heads of ${c.headDim}, biases ${c.attentionBias}, ` +
    `tied head ${model.weights.lmHead === model.weights.embed}, prompt ${c.prefix.length} + ${AUDIO_TOKENS} + ${c.instruction.length}, ${kvHeadCount(c)} KV heads`;
  const r = await runParity({
    name: `${family} miniature via loadModel, ${mode === 'full' ? 'full cache' : 'WnW at r_GPU 0.2'}`,
    config: c,
    weights: model.weights,
    audio: randomEmbeddings(c, AUDIO_TOKENS, 21),
    steps: STEPS,
    mode,
    budget: 0.2,
  });
  return { ...r, name, detail: `${shape}; loaded in ${Math.round(ms)} ms; ${r.detail}`, ms: performance.now() - t0 };
}

/**
 * The Voxtral miniature converted to q4 (`npx wnw convert`, written by the spec under
 * converted/voxtral-q4): the GPU streams its decoder from the shards piece by piece
 * (loadModel's `stream`), the CPU computes with it read
 * whole; tokens and logits must agree as for any other parity case.
 */
async function streamedParity(): Promise<CheckResult> {
  const name = 'parity_hf_voxtral_q4_streamed';
  const root = new URLSearchParams(location.search).get('hf');
  if (!root)
    return { name, pass: false, detail: 'no miniatures folder: open the page as gpu.html?hf=<URL path>', ms: 0 };
  const t0 = performance.now();
  const url = joinModelPath(root, 'converted/voxtral-q4');
  const [inMemory, streamed] = await Promise.all([
    loadModel(url, undefined, { cache: false }),
    loadModel(url, undefined, { cache: false, stream: true }),
  ]);
  if (!inMemory.packed || !streamed.source || streamed.packed)
    return {
      name,
      pass: false,
      detail: 'the converted folder did not load packed, or its stream load held weights',
      ms: 0,
    };
  const c = inMemory.config;
  const r = await runParity({
    name: 'voxtral q4 miniature, decoder streamed from its converted shards',
    config: c,
    weights: inMemory.weights,
    streamed: { packed: inMemory.packed, source: streamed.source },
    audio: randomEmbeddings(c, AUDIO_TOKENS, 23),
    steps: STEPS,
    mode: 'full',
    // Bindings of 1 MiB split the embedding and head into row parts that the 4 MiB pieces straddle.
    backend: { weightFormat: 'q4', maxBindingBytes: 1 << 20 },
    weightParts: { embed: 2, lmHead: 2 },
  });
  return { ...r, name, ms: performance.now() - t0 };
}

/** The head triage on WebGPU against the CPU reference, on the family's miniature in `format`. */
async function hfTriage(family: Family, format: 'f32' | 'q4'): Promise<CheckResult> {
  const name = `triage_hf_${family}_${format}`;
  const root = new URLSearchParams(location.search).get('hf');
  if (!root)
    return { name, pass: false, detail: 'no miniatures folder: open the page as gpu.html?hf=<URL path>', ms: 0 };
  const { model } = await load(family, root);
  return triageParity(name, model, format);
}

/**
 * A user's flow on the family's miniature, in this page: `loadTranscriber` on the folder's URL
 * with WebGPU and the full cache, `calibrate` on a clip, then `transcribe` with WnW on another.
 * That the GPU's triage is the CPU reference's is `triage_hf_*`'s to check; here the heads
 * must come from the answer path on the GPU and WnW must run with them at once.
 */
async function hfCalibrate(family: Family): Promise<CheckResult> {
  const name = `calibrate_hf_${family}`;
  const root = new URLSearchParams(location.search).get('hf');
  if (!root)
    return { name, pass: false, detail: 'no miniatures folder: open the page as gpu.html?hf=<URL path>', ms: 0 };
  const t0 = performance.now();
  const asr = await loadTranscriber({
    model: joinModelPath(root, family),
    policy: 'full',
    backend: 'webgpu',
    cache: false,
  });
  try {
    const cal = await asr.calibrate(await siteClips(['calib001']));
    const audio = await (await fetch('/calibration-data/calib003.wav')).arrayBuffer();
    const r = await asr.transcribe(audio, { policy: 'wnw', budget: 0.2, maxNewTokens: 8 });
    const anchors = cal.heads.roles['0.2']?.anchors.length ?? 0;
    const pass =
      /^webgpu/i.test(asr.backend) &&
      cal.heads.sensitivityEstimator === 'answer-path' &&
      anchors > 0 &&
      asr.modelInfo.heads &&
      !r.error &&
      r.stats.policy === 'wnw';
    return {
      name,
      pass,
      detail:
        `calibrated on ${asr.backend} in ${cal.seconds.toFixed(1)} s: estimator ${cal.heads.sensitivityEstimator}, ${anchors} anchors at r_GPU 0.2; ` +
        `then transcribed with ${r.error ? `error ${r.error.message}` : `${r.stats.policy}, ${r.tokens.length} tokens`}`,
      ms: performance.now() - t0,
    };
  } finally {
    asr.dispose();
  }
}

export const hfTests: Record<string, () => Promise<CheckResult>> = {
  ...Object.fromEntries(FAMILIES.map((f) => [`calibrate_hf_${f}`, () => hfCalibrate(f)])),
  ...Object.fromEntries(
    FAMILIES.flatMap((f) => (['f32', 'q4'] as const).map((q) => [`triage_hf_${f}_${q}`, () => hfTriage(f, q)])),
  ),
  ...Object.fromEntries(
    FAMILIES.flatMap((f) => (['full', 'wnw'] as const).map((m) => [`parity_hf_${f}_${m}`, () => hfParity(f, m)])),
  ),
  parity_hf_voxtral_q4_streamed: streamedParity,
  triage_memory_voxtral_shape: triageMemory,
};
