/**
 * `npm run bench -- --memory --measure`: the sizing held against what the WebGPU backend
 * allocates. At Voxtral-Mini-3B's per-layer shapes with K = 1 and 2 of its 30 layers
 * (random q4 weights, the 131,072-entry embedding and lm_head, f16 pool), its audio tower
 * at Whisper-large-v3 width in f16 encodes one 30 s window, then a full-cache run prefills
 * per layer and decodes, and a
 * createBuffer/destroy hook counts the live GPU bytes: the peak of encoding, of the prefill
 * (up to the pool's placement) and of decoding are set against memoryNeed's three phases
 * for the same recording and text. The tower runs without its layers (convolutions, positions,
 * projector and the batch buffers, which are what its phase adds beyond weights): a layer's
 * weights are per-layer arithmetic (counted upload by upload in encoder-sizing.test.ts), and
 * one layer at that width takes minutes on a software adapter. The full cache's pool
 * is exact in the sizing (a policy's is a bound), so the comparison checks the model of
 * every buffer, not a policy's choices. It runs where WebGPU does: in a page (headless
 * Chromium on SwiftShader here; see webgpu.ts) or on a Node GPU.
 */
import { WebGpuBackend } from '../backend/webgpu/backend.js';
import { towerBytes } from '../encoder/sizing.js';
import { WebGpuWhisperEncoder } from '../encoder/webgpu.js';
import { PipelineCache } from '../gpu/pipelines.js';
import { FAMILIES } from '../model/families/registry.js';
import { ENCODER_SHAPES, randomEncoderTensors } from './encoder.js';
// From its module, not the entry: this runs on a test page that loads only the parts it measures.
import { memoryNeed } from '../backend/webgpu/fit.js';
import { bindingLimits } from '../backend/webgpu/weight-formats.js';
import { GpuContext } from '../gpu/device.js';
import { createPolicy } from '../policy/registry.js';
import { policyLayout } from '../kv/prompt.js';
import { randomEmbeddings } from '../model/testing.js';
import { countLiveBytes } from './live-bytes.js';
import { randomPackedWeights, shapeConfig } from './shapes.js';
import type { MemoryNeed } from '../research.js';

export interface MeasureRequest {
  layers: number[];
  /** Audio tokens of the recording (Voxtral: 375 a 30 s chunk) and decode steps. */
  audioTokens: number;
  steps: number;
  /** The decoder shape (a family record's `shapes.decodeBench.key`); default the first family's that has one. */
  shape?: string;
}

export interface MeasuredRow {
  layers: number;
  audioTokens: number;
  steps: number;
  adapter: string;
  /** Live GPU bytes at their peak, per phase, and the sizing's figures for the same run. */
  measured: { encode: number; prefill: number; decode: number };
  modelled: { encode: number; prefill: number; decode: number };
  weightBytes: number;
}

/** Measured against modelled per phase, and the whole run's peaks: |measured / modelled - 1|. */
export function deviation(r: MeasuredRow): { encode: number; prefill: number; decode: number; peak: number } {
  const d = (a: number, b: number) => Math.abs(a / b - 1);
  const peak = (x: { encode: number; prefill: number; decode: number }) => Math.max(x.encode, x.prefill, x.decode);
  return {
    encode: d(r.measured.encode, r.modelled.encode),
    prefill: d(r.measured.prefill, r.modelled.prefill),
    decode: d(r.measured.decode, r.modelled.decode),
    peak: d(peak(r.measured), peak(r.modelled)),
  };
}

/** Random log-mel at the tower's bins. */
function randomMel(nMels: number, frames: number) {
  const data = new Float32Array(nMels * frames);
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.37) * 0.5;
  return { data, nMels, frames, validFrames: frames };
}

export async function measureMemory(req: MeasureRequest): Promise<MeasuredRow[]> {
  const rows: MeasuredRow[] = [];
  const family = FAMILIES.find(
    (f) => f.shapes.decodeBench && (req.shape === undefined || f.shapes.decodeBench.key === req.shape),
  );
  if (!family?.shapes.decodeBench)
    throw new RangeError(`no family record has the decoder shape ${JSON.stringify(req.shape)}`);
  const { key } = family.shapes.decodeBench;
  for (const K of req.layers) {
    const c = shapeConfig(key, K);
    const weights = randomPackedWeights(c, 'q4');
    const ctx = await GpuContext.acquire();
    const hook = countLiveBytes(ctx.device);
    const backend = await WebGpuBackend.create(c, weights, { context: ctx, kvPrecision: 'f16' });
    const A = req.audioTokens;
    const seconds = A / c.audio.tokensPerSecond;
    // The sizing of this very run: its text is the steps decoded, its cap the session's.
    const maxNewTokens = req.steps + 2;
    const towerConfig = { ...ENCODER_SHAPES['whisper-large-v3-shape'], layers: 0 };
    const audioTower = towerBytes(
      towerConfig,
      family.encoder,
      c.hiddenSize,
      'f16',
      ctx.limits.maxStorageBufferBindingSize,
    );
    const plan: MemoryNeed = memoryNeed(
      c,
      {
        weightFormat: 'q4',
        tied: false,
        audioTokens: A,
        kvPrecision: 'f16',
        budget: 1,
        maxNewTokens,
        textPerSecond: req.steps / seconds,
        audioTower,
      },
      bindingLimits(ctx),
    );
    hook.resetPeak();
    const tower = await WebGpuWhisperEncoder.create(
      ctx,
      new PipelineCache(ctx),
      towerConfig,
      family.encoder,
      randomEncoderTensors(towerConfig, family.encoder, c.hiddenSize),
      { weightFormat: 'f16' },
    );
    await tower.encode(randomMel(towerConfig.nMels, family.encoder.windowFrames));
    tower.destroy();
    const encode = hook.peak;
    const policy = createPolicy('full', { budget: 1 });
    const layout = policyLayout(c, A);
    hook.resetPeak();
    const stage = backend.openByLayer({
      audioLength: A,
      maxNewTokens,
      request: { ...policy.request(layout), decodeHeads: [] },
    });
    const pre = await stage.prefill(randomEmbeddings(c, A, 5), policy.prefillByLayer!(layout));
    const prefill = hook.peak;
    hook.resetPeak();
    let token = pre.token;
    for (let s = 0; s < req.steps; s++) token = (await pre.session.step(token)).token;
    const decode = hook.peak;
    backend.dispose();
    hook.stop();
    ctx.device.destroy();
    rows.push({
      layers: K,
      audioTokens: A,
      steps: req.steps,
      adapter: ctx.info.label,
      measured: { encode, prefill, decode },
      modelled: plan.phasesFull,
      weightBytes: plan.weightBytes,
    });
  }
  return rows;
}

const mb = (b: number) => (b / 1e6).toFixed(1);

export function measuredMarkdown(rows: MeasuredRow[]): string {
  const lines = [
    '| layers | audio tokens | steps | encode peak: measured / modelled MB | prefill peak: measured / modelled MB | ' +
      'decode peak: measured / modelled MB | peak deviation |',
    '|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const d = deviation(r);
    lines.push(
      `| ${r.layers} | ${r.audioTokens} | ${r.steps} | ${mb(r.measured.encode)} / ${mb(r.modelled.encode)} | ` +
        `${mb(r.measured.prefill)} / ${mb(r.modelled.prefill)} | ${mb(r.measured.decode)} / ${mb(r.modelled.decode)} | ` +
        `${(100 * d.peak).toFixed(2)} % |`,
    );
  }
  lines.push(
    '',
    `Live GPU bytes counted by a createBuffer/destroy hook on ${rows[0]?.adapter ?? 'the device'}, ` +
      "Voxtral-Mini-3B's per-layer shapes, random q4 weights, f16 pool, full cache, per-layer prefill, " +
      'the audio tower at Whisper-large-v3 width in f16 without its layers, one 30 s window; ' +
      'modelled: memoryNeed for the same run.',
  );
  return lines.join('\n');
}
