/**
 * `npm run bench -- --memory --measure`: the sizing held against what the WebGPU backend
 * allocates. At Voxtral-Mini-3B's per-layer shapes with K = 1 and 2 of its 30 layers
 * (random q4 weights, the 131,072-entry embedding and lm_head, f16 pool), a full-cache run
 * prefills per layer and decodes, and a createBuffer/destroy hook counts the live GPU
 * bytes: the peak of the prefill (up to the pool's placement) and of decoding are set
 * against planMemory's two phases for the same recording and text. The full cache's pool
 * is exact in the sizing (a policy's is a bound), so the comparison checks the model of
 * every buffer, not a policy's choices. It runs where WebGPU does: in a page (headless
 * Chromium on SwiftShader here; see webgpu.ts) or on a Node GPU.
 */
import { WebGpuBackend } from '../backend/webgpu/backend.js';
import { planMemory, type MemoryPlan } from '../backend/webgpu/fit.js';
import { bindingLimits } from '../backend/webgpu/weight-formats.js';
import { GpuContext } from '../gpu/device.js';
import { createPolicy } from '../policy/registry.js';
import { policyLayout } from '../backend/prompt.js';
import { randomEmbeddings } from '../model/testing.js';
import { countLiveBytes } from './live-bytes.js';
import { randomPackedWeights, shapeConfig } from './shapes.js';

export interface MeasureRequest {
  layers: number[];
  /** Audio tokens of the recording (Voxtral: 375 a 30 s chunk) and decode steps. */
  audioTokens: number;
  steps: number;
}

export interface MeasuredRow {
  layers: number;
  audioTokens: number;
  steps: number;
  adapter: string;
  /** Live GPU bytes at their peak, per phase, and the sizing's figures for the same run. */
  measured: { prefill: number; decode: number };
  modelled: { prefill: number; decode: number };
  weightBytes: number;
}

/** Measured against modelled per phase, and the whole run's peaks: |measured / modelled - 1|. */
export function deviation(r: MeasuredRow): { prefill: number; decode: number; peak: number } {
  const d = (a: number, b: number) => Math.abs(a / b - 1);
  return {
    prefill: d(r.measured.prefill, r.modelled.prefill),
    decode: d(r.measured.decode, r.modelled.decode),
    peak: d(Math.max(r.measured.prefill, r.measured.decode), Math.max(r.modelled.prefill, r.modelled.decode)),
  };
}

export async function measureMemory(req: MeasureRequest): Promise<MeasuredRow[]> {
  const rows: MeasuredRow[] = [];
  for (const K of req.layers) {
    const c = shapeConfig('voxtral-mini-3b', K);
    const weights = randomPackedWeights(c, 'q4');
    const ctx = await GpuContext.acquire();
    const hook = countLiveBytes(ctx.device);
    const backend = await WebGpuBackend.create(c, weights, { context: ctx, kvPrecision: 'f16' });
    const A = req.audioTokens;
    const seconds = A / c.audio.tokensPerSecond;
    // The sizing of this very run: its text is the steps decoded, its cap the session's.
    const maxNewTokens = req.steps + 2;
    const plan: MemoryPlan = planMemory(c, { weightFormat: 'q4', tied: false, audioTokens: A, kvPrecision: 'f16', budget: 1, maxNewTokens, textPerSecond: req.steps / seconds }, bindingLimits(ctx));
    const policy = createPolicy('full', { budget: 1 });
    const layout = policyLayout(c, A);
    hook.resetPeak();
    backend.begin({ audioLength: A, maxNewTokens, request: { ...policy.request(layout), decodeHeads: [] }, layered: true });
    const pre = await backend.prefillByLayer(randomEmbeddings(c, A, 5), policy.prefillByLayer!(layout));
    const prefill = hook.peak;
    hook.resetPeak();
    let token = pre.token;
    for (let s = 0; s < req.steps; s++) token = (await backend.step(token)).token;
    const decode = hook.peak;
    backend.dispose();
    hook.stop();
    ctx.device.destroy();
    rows.push({ layers: K, audioTokens: A, steps: req.steps, adapter: ctx.info.label, measured: { prefill, decode }, modelled: plan.phasesFull, weightBytes: plan.weightBytes });
  }
  return rows;
}

const mb = (b: number) => (b / 1e6).toFixed(1);

export function measuredMarkdown(rows: MeasuredRow[]): string {
  const lines = [
    '| layers | audio tokens | steps | prefill peak: measured / modelled MB | decode peak: measured / modelled MB | peak deviation |',
    '|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const d = deviation(r);
    lines.push(`| ${r.layers} | ${r.audioTokens} | ${r.steps} | ${mb(r.measured.prefill)} / ${mb(r.modelled.prefill)} | ${mb(r.measured.decode)} / ${mb(r.modelled.decode)} | ${(100 * d.peak).toFixed(2)} % |`);
  }
  lines.push('', `Live GPU bytes counted by a createBuffer/destroy hook on ${rows[0]?.adapter ?? 'the device'}, Voxtral-Mini-3B's per-layer shapes, random q4 weights, f16 pool, full cache, per-layer prefill; modelled: planMemory for the same run.`);
  return lines.join('\n');
}
