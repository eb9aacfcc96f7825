/**
 * The soak (scripts/soak/main.ts drives it): many transcriptions in one page on WebGPU,
 * through the worker client, alternating models, KV precisions, policies and clip lengths.
 * One worker per (model, KV precision), loaded once; after every run the page records the
 * live GPU buffers and bytes of every worker (their createBuffer/destroy hooks,
 * soak-worker.ts), the JS heap of the page and of each worker after a garbage collection,
 * and the bytes of the origin's OPFS (the weight cache).
 * Exposed as window.wnwSoak.run(plan).
 */
import { loadTranscriberInWorker } from '../../src/worker/client.js';
import { parseWav } from '../../src/audio/wav.js';
import { downmix } from '../../src/audio/downmix.js';
import type { LoadOptions, PolicyName, Transcriber } from '../../src/types.js';
import type { KvPrecision } from '../../src/kv/precision.js';
import type { SoakMemory } from './soak-worker.js';

export interface SoakModel {
  name: string;
  load: Omit<LoadOptions, 'kvPrecision' | 'onProgress' | 'signal'>;
}
export interface SoakPlan {
  runs: number;
  models: SoakModel[];
  policies: PolicyName[];
  precisions: KvPrecision[];
  /** Clip lengths in seconds, cut from the start of the sample. */
  seconds: number[];
  maxNewTokens: number;
  /**
   * Each (model, precision) transcriber runs once at each clip length before run 1: the ONNX
   * runtime keeps GPU buffers sized for the longest input it has seen, made at its first run
   * at a length (measured: see docs/evaluation.md's soak paragraph).
   */
  warmup: boolean;
}

/** `onnxGpuBytes`: the part of `gpuBytes` in the ONNX runtime's (unlabelled) buffers. */
export interface Memory {
  gpuBuffers: number;
  gpuBytes: number;
  onnxGpuBytes: number;
  heapBytes: number | null;
  pageHeapBytes: number | null;
  opfsBytes: number;
}
export interface SoakRun extends Memory {
  run: number;
  model: string;
  kvPrecision: KvPrecision;
  policy: PolicyName;
  seconds: number;
  text: string;
  tokens: number;
  stoppedBy: string;
  error: string | null;
  ms: number;
}
export interface SoakResult {
  loadMs: number;
  afterLoad: Memory;
  warmup: SoakRun[];
  runs: SoakRun[];
}

interface Loaded {
  model: SoakModel;
  kvPrecision: KvPrecision;
  asr: Transcriber;
  worker: Worker;
}

let probeId = -1;
/** The live GPU buffers, bytes and JS heap of one worker. */
function probe(worker: Worker): Promise<SoakMemory> {
  const id = probeId--;
  return new Promise((resolve) => {
    const on = (e: MessageEvent<SoakMemory>) => {
      if (e.data?.type !== 'soak-memory' || e.data.id !== id) return;
      worker.removeEventListener('message', on);
      resolve(e.data);
    };
    worker.addEventListener('message', on);
    worker.postMessage({ type: 'soak-memory', id });
  });
}

/** Bytes of every file in the origin's private file system (where the weight cache lives). */
async function opfsBytes(): Promise<number> {
  const walk = async (dir: FileSystemDirectoryHandle): Promise<number> => {
    let n = 0;
    for await (const h of (dir as unknown as { values(): AsyncIterable<FileSystemHandle> }).values()) {
      n +=
        h.kind === 'file'
          ? (await (h as FileSystemFileHandle).getFile()).size
          : await walk(h as FileSystemDirectoryHandle);
    }
    return n;
  };
  return walk(await navigator.storage.getDirectory());
}

/**
 * The JS memory of the page and its workers together (where the transcribers' objects live),
 * measured by the browser after its own garbage collection: `measureUserAgentSpecificMemory`,
 * which needs a cross-origin isolated page (the soak's server sends COOP/COEP) and answers at
 * once with --enable-blink-features=ForceEagerMeasureMemory. Workers do not have
 * `performance.memory`; where this is missing too, the sum of what does answer is null.
 */
async function jsHeapBytes(each: SoakMemory[], pageHeapBytes: number | null): Promise<number | null> {
  const measure = (performance as Performance & { measureUserAgentSpecificMemory?: () => Promise<{ bytes: number }> })
    .measureUserAgentSpecificMemory;
  if (crossOriginIsolated && measure) return (await measure.call(performance)).bytes;
  const heaps = each.map((m) => m.heapBytes);
  return heaps.every((h) => h !== null) && pageHeapBytes !== null
    ? heaps.reduce((a, h) => a + h!, pageHeapBytes)
    : null;
}

async function memory(loaded: Loaded[]): Promise<Memory> {
  const each = await Promise.all(loaded.map((l) => probe(l.worker)));
  (globalThis as { gc?: () => void }).gc?.();
  const page = (performance as Performance & { memory?: { usedJSHeapSize: number } }).memory;
  const pageHeapBytes = page ? page.usedJSHeapSize : null;
  return {
    gpuBuffers: each.reduce((a, m) => a + m.buffers, 0),
    gpuBytes: each.reduce((a, m) => a + m.bytes, 0),
    onnxGpuBytes: each.reduce((a, m) => a + m.unlabelledBytes, 0),
    heapBytes: await jsHeapBytes(each, pageHeapBytes),
    pageHeapBytes,
    opfsBytes: await opfsBytes(),
  };
}

async function clipOf(seconds: number): Promise<Float32Array> {
  const r = await fetch('/samples/sample1.wav');
  const all = downmix(parseWav(new Uint8Array(await r.arrayBuffer())).channels);
  if (all.length < seconds * 16000) throw new Error(`the sample holds ${all.length / 16000} s, ${seconds} s asked`);
  return all.slice(0, seconds * 16000);
}

async function run(plan: SoakPlan): Promise<SoakResult> {
  const clips = new Map<number, Float32Array>();
  for (const s of plan.seconds) clips.set(s, await clipOf(s));
  const t0 = performance.now();
  const loaded: Loaded[] = [];
  for (const model of plan.models) {
    for (const kvPrecision of plan.precisions) {
      let worker: Worker | null = null;
      const asr = await loadTranscriberInWorker({ ...model.load, kvPrecision }, () => {
        worker = new Worker(new URL('./soak-worker.ts', import.meta.url), {
          type: 'module',
          name: `wnw-soak-${model.name}-${kvPrecision}`,
        });
        return worker;
      });
      loaded.push({ model, kvPrecision, asr, worker: worker! });
    }
  }
  const loadMs = performance.now() - t0;
  const afterLoad = await memory(loaded);
  // The driver's console line for each run as it ends (a soak takes minutes).
  const told = (window as unknown as { wnwSoakProgress?: (r: SoakRun) => void }).wnwSoakProgress;
  const once = async (n: number, l: Loaded, policy: PolicyName, seconds: number): Promise<SoakRun> => {
    const t = performance.now();
    const r = await l.asr.transcribe(clips.get(seconds)!, { policy, maxNewTokens: plan.maxNewTokens });
    const ms = performance.now() - t;
    const out: SoakRun = {
      run: n,
      model: l.model.name,
      kvPrecision: l.kvPrecision,
      policy,
      seconds,
      text: r.text,
      tokens: r.tokens.length,
      stoppedBy: r.stats.stoppedBy,
      error: r.error ? `${r.error.name}: ${r.error.message}` : null,
      ms,
      ...(await memory(loaded)),
    };
    told?.(out);
    return out;
  };
  const warmup: SoakRun[] = [];
  if (plan.warmup)
    for (const seconds of plan.seconds) for (const l of loaded) warmup.push(await once(0, l, 'full', seconds));
  const runs: SoakRun[] = [];
  for (let i = 0; i < plan.runs; i++) {
    // The model changes every run, the precision every second run, the clip every fourth; the
    // policy every run, shifted by one each round of four, so over 16 runs each (model,
    // precision) transcriber meets every policy, and both clip lengths.
    const m = i % plan.models.length;
    const p = Math.floor(i / plan.models.length) % plan.precisions.length;
    const l = loaded[m * plan.precisions.length + p];
    const policy = plan.policies[(i + Math.floor(i / 4)) % plan.policies.length];
    runs.push(await once(i + 1, l, policy, plan.seconds[Math.floor(i / 4) % plan.seconds.length]));
  }
  for (const l of loaded) l.asr.dispose();
  return { loadMs, afterLoad, warmup, runs };
}

(window as unknown as { wnwSoak: unknown }).wnwSoak = { run };
document.getElementById('status')!.textContent = 'ready';
