/**
 * The WebGPU half of `npm run bench -- --calibration-cost`: the time of one prefill forward
 * at a real backbone's per-layer shapes (K layers of random packed weights, the real
 * vocabulary), where WebGPU runs (a page: headless Chromium on SwiftShader here; or a Node
 * GPU). The Head Sensitivity's forwards run on the CPU reference today; a prefill over the
 * same number of positions is the same work per layer (the same matrices over the same
 * rows, the same causal attention), so its time is the cost per forward a WebGPU
 * calibration would pay. Browser-safe: the bench page imports it.
 */
import { WebGpuBackend } from '../backend/webgpu/backend.js';
import { policyLayout } from '../kv/prompt.js';
import { GpuContext } from '../gpu/device.js';
import { promptLength } from '../model/config.js';
import { randomEmbeddings } from '../model/testing.js';
import { createPolicy } from '../policy/registry.js';
import { randomPackedWeights, shapeConfig } from './shapes.js';
import type { WeightFormat } from '../index.js';

export interface GpuForwardRequest {
  shape: string;
  layers: number;
  /** Positions of the prompt's audio part; a calibration forward's answer tokens are counted in here (same rows per layer). */
  audioTokens: number;
  weights: WeightFormat;
  /** Timed prefills after one untimed (pipelines compile in the first). */
  reps: number;
}

export interface GpuForwardRow {
  adapter: string;
  layers: number;
  /** Rows the layers ran over (prompt length). */
  positions: number;
  weights: WeightFormat;
  /** Each timed prefill, ms (the warm-up excluded). */
  ms: number[];
  /** The untimed first prefill (pipeline compilation included), ms. */
  firstMs: number;
}

export async function measureGpuForward(req: GpuForwardRequest): Promise<GpuForwardRow> {
  const c = shapeConfig(req.shape, req.layers);
  const ctx = await GpuContext.acquire();
  const backend = await WebGpuBackend.create(c, randomPackedWeights(c, req.weights), {
    context: ctx,
    weightFormat: req.weights,
  });
  const A = req.audioTokens;
  const layout = policyLayout(c, A);
  const request = createPolicy('full', { budget: 1 }).request(layout);
  const emb = randomEmbeddings(c, A, 5);
  const times: number[] = [];
  try {
    for (let r = 0; r <= req.reps; r++) {
      const stage = backend.open({ audioLength: A, maxNewTokens: 2, request });
      const t0 = performance.now();
      // Prefill ends with the first token read back: the device has finished the layers.
      await stage.prefill(emb);
      times.push(performance.now() - t0);
      stage.close();
    }
  } finally {
    backend.dispose();
    ctx.device.destroy();
  }
  return {
    adapter: ctx.info.label,
    layers: req.layers,
    positions: promptLength(c, A),
    weights: req.weights,
    ms: times.slice(1),
    firstMs: times[0],
  };
}
