/**
 * `npm run bench -- --triage-host-memory [--layers 1]`: the host memory the CPU backend's head
 * triage (the answer path's forward and answer-row backward, src/calibrate/answer-path.ts) holds at
 * Voxtral-Mini-3B's widths (K of its 30 layers, the 131,072-entry vocabulary, random q4
 * weights), against the packed weights: the resident set's peak above the process's own
 * before the weights, as a multiple of their bytes. An f32 copy of the decoder would put it
 * past 8.
 */
import { randomEmbeddings } from '../model/testing.js';
import { packedWeightBytes } from '../model/packed-weights.js';
import { CpuBackend } from '../backend/cpu/backend.js';
import { randomPackedWeights, shapeConfig } from './shapes.js';

export async function triageHostMain(argv: string[], log: (s: string) => void): Promise<void> {
  const i = argv.indexOf('--layers');
  const layers = i >= 0 ? Number(argv[i + 1]) : 1;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) log('bench: run as `node --expose-gc --import tsx src/bench/main.ts ...` for a clean baseline (no gc here)');
  const c = shapeConfig('voxtral-mini-3b', layers);
  const rss = () => process.memoryUsage().rss;
  const before = rss();
  const packed = randomPackedWeights(c, 'q4', 3);
  gc?.();
  const weights = packedWeightBytes(packed).total;
  const afterWeights = rss();
  const backend = new CpuBackend(c, packed);
  const N = 24;
  const answer = [11, 12, 13, 14, 15, c.stopTokens[0]];
  const t0 = performance.now();
  // The triage runs on this thread: the resident set is read when it returns, its arrays still held.
  const r = await backend.triage(randomEmbeddings(c, N, 5), N, answer);
  const after = rss();
  const out = {
    shape: `voxtral-mini-3b, ${layers} layer(s), q4`,
    packedWeightsMB: weights / 1e6,
    rssBeforeMB: before / 1e6,
    rssWithWeightsMB: afterWeights / 1e6,
    rssAfterTriageMB: after / 1e6,
    overPackedWeights: (Math.max(after, afterWeights) - before) / weights,
    seconds: (performance.now() - t0) / 1000,
    heads: r.sum.length,
  };
  console.log(JSON.stringify(out, null, 1));
}
