/**
 * WebGPU rows of the benchmark: in Node through Dawn when it finds a real GPU, else in
 * headless Chromium on SwiftShader (CPU numbers, labelled so) through a harness page.
 */
import type { PolicyTiming } from './decode.js';
import { timeFullAndWnw, type TimingOptions } from './decode.js';
import type { HeadsFile } from '../model/heads.js';
import type { KvPrecision } from '../index.js';

export type GpuRow = PolicyTiming & { backend: string; minutes: number; audioTokens: number; msPerTokenVsFull: number };

export interface GpuBenchOptions {
  modelDir: string;
  hasModel: boolean;
  heads: HeadsFile;
  minutes: number[];
  steps: number;
  log: (s: string) => void;
  kv: KvPrecision;
  timing?: TimingOptions & { withPaperLag?: boolean };
}

async function nodeGpu(o: GpuBenchOptions): Promise<GpuRow[] | null> {
  const { createWebGpuBackend } = await import('../backend/webgpu/index.js');
  const { loadModel } = await import('../model/loader.js');
  const { randomDecoderWeights, randomEmbeddings, referenceConfig } = await import('../model/testing.js');
  const m = o.hasModel ? await loadModel(o.modelDir) : null;
  const config = m?.config ?? referenceConfig();
  const weights = m?.weights ?? randomDecoderWeights(config, 1);
  let backend;
  try {
    backend = await createWebGpuBackend(config, weights, { allowSoftware: false, kvPrecision: o.kv });
  } catch (e) {
    o.log(`bench: no hardware GPU for Node (${e instanceof Error ? e.message.split('.')[0] : String(e)})`);
    return null;
  }
  const rows: GpuRow[] = [];
  for (const minutes of o.minutes) {
    const N = Math.round(minutes * 60 * config.audio.tokensPerSecond);
    const emb = randomEmbeddings(config, N, 5);
    const ts = await timeFullAndWnw(backend, config, emb, N, o.heads, o.steps, o.timing);
    const full = ts[0];
    for (const t of ts)
      rows.push({
        backend: backend.label,
        minutes,
        audioTokens: N,
        ...t,
        msPerTokenVsFull: t.msPerToken / full.msPerToken,
      });
  }
  backend.dispose();
  return rows;
}

/**
 * Runs `call(page)` on the bench harness page (e2e/harness/bench.html) in headless
 * Chromium, served by vite; null where there is no Chromium (WNW_CHROMIUM).
 */
export async function onHarnessPage<T>(
  log: (s: string) => void,
  call: (page: import('playwright-core').Page) => Promise<T>,
): Promise<T | null> {
  const { existsSync } = await import('node:fs');
  const exe = process.env.WNW_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(exe)) {
    log(`bench: no Chromium at ${exe} (set WNW_CHROMIUM): no WebGPU rows`);
    return null;
  }
  const { createServer } = await import('vite');
  const { chromium } = await import('playwright-core');
  const { chromiumArgs } = await import('../../playwright.config.js');
  // No hot reload: an edit to a source file during a long run must not reload the page under it.
  const server = await createServer({
    server: {
      port: 5311,
      strictPort: false,
      host: '127.0.0.1',
      hmr: false,
      watch: null,
      // Cross-origin isolated: performance.now() then ticks in microseconds, not Chromium's coarsened 100 µs.
      headers: { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' },
    },
    logLevel: 'error',
  });
  await server.listen();
  const url = server.resolvedUrls?.local[0] ?? 'http://127.0.0.1:5311/';
  const browser = await chromium.launch({ executablePath: exe, args: chromiumArgs });
  try {
    const page = await browser.newPage();
    page.on(
      'console',
      (m) => (m.type() === 'error' || m.text().startsWith('bench:')) && log(`bench (page): ${m.text()}`),
    );
    await page.goto(new URL('e2e/harness/bench.html', url).href);
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
      timeout: 120_000,
    });
    return await call(page);
  } finally {
    await browser.close();
    await server.close();
  }
}

async function chromiumGpu(o: GpuBenchOptions): Promise<GpuRow[]> {
  const rows = await onHarnessPage(
    o.log,
    (page) =>
      page.evaluate((req) => (window as unknown as { wnwBench(r: unknown): Promise<unknown> }).wnwBench(req), {
        model: o.hasModel ? '/' + o.modelDir.replace(/^public\//, '') : null,
        minutes: o.minutes,
        steps: o.steps,
        heads: o.heads,
        kv: o.kv,
        timing: o.timing,
      }) as Promise<GpuRow[]>,
  );
  return (rows ?? []).map((r) => ({ ...r, backend: `${r.backend} in headless Chromium` }));
}

/**
 * SwiftShader's prefill attention is quadratic on the CPU (~1 min for 1,000 tokens), so
 * in Chromium without a real GPU only lengths up to `softwareMaxMinutes` are run.
 */
export async function benchWebGpu(o: GpuBenchOptions & { softwareMaxMinutes?: number }): Promise<GpuRow[]> {
  const hw = await nodeGpu(o);
  if (hw) return hw;
  const cap = o.softwareMaxMinutes ?? 1;
  const minutes = o.minutes.filter((m) => m <= cap);
  if (minutes.length < o.minutes.length)
    o.log(`bench: SwiftShader WebGPU rows only up to ${cap} min (--software-max-minutes to raise)`);
  return minutes.length ? chromiumGpu({ ...o, minutes }) : [];
}
