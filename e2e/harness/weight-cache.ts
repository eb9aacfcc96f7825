/**
 * The browser cache of weights packed at load (src/model/weight-cache.ts), on a miniature
 * loaded by URL: every fetch of a shard with a Range header is counted, so a load served
 * from the cache can be told from one that read the shards.
 * Exposed as window.wnwWeightCache.run(folderUrl, format, options).
 */
import { clearWeightCache } from '../../src/index.js';
import { loadModel } from '../../src/model/loader.js';
import type { PackedDecoderWeights } from '../../src/model/packed-weights.js';
import type { PackedMatrix, WeightFormat } from '../../src/model/quant.js';
import { readPackedSource } from '../../src/model/packed-source.js';

let rangeReads = 0;
let rangeBytes = 0;
const realFetch = window.fetch.bind(window);
window.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const range = new Headers(init?.headers).get('range');
  if (range && url.endsWith('.safetensors')) {
    rangeReads++;
    const m = /bytes=(\d+)-(\d+)/.exec(range);
    if (m) rangeBytes += Number(m[2]) - Number(m[1]) + 1;
  }
  return realFetch(input, init);
};

function sameMatrix(a: PackedMatrix, b: PackedMatrix): boolean {
  if (a.format !== b.format || a.rows !== b.rows || a.cols !== b.cols || a.data.length !== b.data.length) return false;
  for (let i = 0; i < a.data.length; i++) if (a.data[i] !== b.data[i]) return false;
  return true;
}
const sameVec = (a?: Float32Array, b?: Float32Array) =>
  (!a && !b) || (!!a && !!b && a.length === b.length && a.every((x, i) => Object.is(x, b[i])));

function samePacked(a: PackedDecoderWeights, b: PackedDecoderWeights): boolean {
  return (
    a.format === b.format &&
    sameMatrix(a.embed, b.embed) &&
    sameMatrix(a.lmHead, b.lmHead) &&
    (a.lmHead === a.embed) === (b.lmHead === b.embed) &&
    sameVec(a.norm, b.norm) &&
    a.layers.length === b.layers.length &&
    a.layers.every((l, i) => {
      const m = b.layers[i];
      return (
        sameMatrix(l.qkv, m.qkv) &&
        sameMatrix(l.o, m.o) &&
        sameMatrix(l.gateUp, m.gateUp) &&
        sameMatrix(l.down, m.down) &&
        sameVec(l.attnNorm, m.attnNorm) &&
        sameVec(l.mlpNorm, m.mlpNorm) &&
        sameVec(l.qkvBias, m.qkvBias)
      );
    })
  );
}

async function load(url: string, format: WeightFormat, cache?: boolean) {
  const [r0, b0] = [rangeReads, rangeBytes];
  const details: string[] = [];
  let progress: { loaded: number; total: number } | null = null;
  const m = await loadModel(
    url,
    (_, d, b, phase) => {
      details.push(d);
      if (phase !== 'convert') progress = b ?? progress;
    },
    { weightFormat: format, ...(cache === undefined ? {} : { cache }) },
  );
  return {
    packed: m.packed!,
    ranges: rangeReads - r0,
    bytes: rangeBytes - b0,
    fromCache: details.some((d) => d.includes('browser cache')),
    progress,
  };
}

/** Two loads; with `options`, also a `cache: false` load and one after `clearWeightCache()`. */
async function run(url: string, format: WeightFormat, options: boolean) {
  await clearWeightCache();
  const first = await load(url, format);
  const second = await load(url, format);
  const out: Record<string, unknown> = {
    opfs: typeof navigator.storage?.getDirectory === 'function',
    first: { ranges: first.ranges, bytes: first.bytes, fromCache: first.fromCache, progress: first.progress },
    second: {
      ranges: second.ranges,
      bytes: second.bytes,
      fromCache: second.fromCache,
      same: samePacked(second.packed, first.packed),
    },
  };
  if (options) {
    const uncached = await load(url, format, false);
    out.uncached = {
      ranges: uncached.ranges,
      fromCache: uncached.fromCache,
      same: samePacked(uncached.packed, first.packed),
    };
    await clearWeightCache();
    const afterClear = await load(url, format);
    out.afterClear = { ranges: afterClear.ranges, fromCache: afterClear.fromCache };
  }
  await clearWeightCache();
  return out;
}

/**
 * Loads with `stream` (the WebGPU path): the first fills the cache from the shards, the
 * second locates the cache's entry without a Range request; the second's source, read
 * whole, is the folder's decoder as a load without `stream` gives it.
 */
async function runStreamed(url: string, format: WeightFormat) {
  await clearWeightCache();
  const streamLoad = async () => {
    const [r0, b0] = [rangeReads, rangeBytes];
    const details: string[] = [];
    let progress: { loaded: number; total: number } | null = null;
    const m = await loadModel(
      url,
      (_, d, b) => {
        details.push(d);
        progress = b ?? progress;
      },
      { weightFormat: format, stream: true },
    );
    return {
      m,
      ranges: rangeReads - r0,
      bytes: rangeBytes - b0,
      fromCache: details.some((d) => d.includes('browser cache')),
      progress,
    };
  };
  const first = await streamLoad();
  const second = await streamLoad();
  const reference = await load(url, format, false);
  const read = second.m.source ? await readPackedSource(second.m.source) : null;
  const out = {
    first: {
      ranges: first.ranges,
      fromCache: first.fromCache,
      packed: first.m.packed !== undefined,
      where: first.m.source?.where ?? null,
      progress: first.progress,
    },
    second: {
      ranges: second.ranges,
      bytes: second.bytes,
      fromCache: second.fromCache,
      packed: second.m.packed !== undefined,
      where: second.m.source?.where ?? null,
      same: !!read && samePacked(read, reference.packed),
    },
  };
  await clearWeightCache();
  return out;
}

(window as unknown as { wnwWeightCache: unknown }).wnwWeightCache = { run, runStreamed };
document.getElementById('status')!.textContent = 'ready';
