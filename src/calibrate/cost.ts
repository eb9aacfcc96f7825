/** What a calibration costs, in decoder forwards (no engine code: the page's own bundle imports it). */
import type { ModelConfig } from '../model/config.js';

/**
 * Forward passes one clip costs, in full decoder forwards: the Voice Score's teacher-forced
 * pass, the Head Sensitivity's unperturbed pass, then per KV head of layer l, M forwards of
 * the layers from l on (sensitivity.ts): 2 + M · H_kv · Σ_l (L − l) / L.
 */
export function forwardsPerClip(c: Pick<ModelConfig, 'numLayers' | 'numKvHeads'>, directions: number): number {
  const L = c.numLayers;
  let layers = 0;
  for (let l = 0; l < L; l++) layers += L - l;
  return 2 + (directions * c.numKvHeads * layers) / L;
}
