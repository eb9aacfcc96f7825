/** A miniature with a heads.json from seeded scores, as the GPU parity harness builds one: WnW runs on random weights. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildHeadsFile } from '../../src/calibrate/heads-file.js';
import { kvHeadCount, segmentLength, type ModelConfig } from '../../src/model/config.js';
import { linkedCopy } from './miniatures.js';

/** A copy of the miniature in `src` (links to its files) at `dst`, with a heads.json for clips of `audioLength` tokens. */
export function withSeededHeads(
  src: string,
  dst: string,
  t: { model: { config: ModelConfig } },
  audioLength: number,
): string {
  linkedCopy(src, dst);
  const c = t.model.config;
  let s = 12345;
  const r = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const n = kvHeadCount(c);
  const heads = buildHeadsFile({
    model: c.name,
    numLayers: c.numLayers,
    numKvHeads: c.numKvHeads,
    voiceScore: Array.from({ length: n }, () => r()),
    headSensitivity: Array.from({ length: n }, () => 0.1 + r()),
    budgets: [0.2],
    clipLengths: [audioLength],
    segmentLength: segmentLength(c),
  });
  writeFileSync(join(dst, 'heads.json'), JSON.stringify(heads));
  return dst;
}
