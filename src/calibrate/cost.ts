/** What a calibration costs, in decoder forwards (no engine code: the page's own bundle imports it). */
import type { ModelConfig } from '../model/config.js';

/**
 * Forward passes one clip costs, in full decoder forwards. 'direct-path': two teacher-forced
 * passes, the second keeping the Voice Score's rows (direct-sensitivity.ts).
 * 'finite-difference': the Voice Score's teacher-forced pass, the Head Sensitivity's
 * unperturbed pass, then per KV head of layer l, M forwards of the layers from l on
 * (sensitivity.ts): 2 + M · H_kv · Σ_l (L − l) / L.
 */
export function forwardsPerClip(
  c: Pick<ModelConfig, 'numLayers' | 'numKvHeads'>,
  estimator: 'direct-path' | 'finite-difference',
  directions: number,
): number {
  if (estimator === 'direct-path') return 2;
  const L = c.numLayers;
  let layers = 0;
  for (let l = 0; l < L; l++) layers += L - l;
  return 2 + (directions * c.numKvHeads * layers) / L;
}
