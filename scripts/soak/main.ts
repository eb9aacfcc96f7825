/**
 * `npm run soak -- --runs 20`: many transcriptions in one headless Chromium page on WebGPU
 * (SwiftShader where there is no GPU), through the worker client, alternating the shipped
 * reference model and a Hugging Face miniature (calibrated here once, so WnW runs on it
 * too), f32 and f16 KV, the policies full / wnw / snapkv / quest and two clip lengths
 * (e2e/harness/soak.ts). After every run it records the live GPU buffers and bytes, the JS
 * heap and the OPFS cache; it passes when the GPU bytes after the last run are within 1 % of
 * those after run 2, the heap within 5 %, and no run failed. Writes the JSON (--out).
 * Options: --runs N (20), --out FILE (eval/soak.json), --seconds A,B (4,12),
 * --max-new-tokens N (24), --family F (qwen2_audio), --port P (0: a free one), --no-warmup (skip the
 * one run per transcriber and clip length before run 1).
 */
import '../../src/platform/node-host.js';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { createServer as createNetServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createServer } from 'vite';
import { chromiumArgs } from '../../playwright.config.js';
import { ensureMiniatures, type MiniatureFamily } from '../../test/helpers/miniatures.js';
import type { SoakPlan, SoakResult, SoakRun } from '../../e2e/harness/soak.js';
import { flatness, type Flatness } from './criteria.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function args(argv: string[]) {
  const get = (name: string, fallback: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
  };
  const int = (name: string, fallback: number, min: number) => {
    const v = Number(get(name, String(fallback)));
    if (!Number.isInteger(v) || v < min)
      throw new Error(`--${name} must be a whole number from ${min}, got ${get(name, '')}`);
    return v;
  };
  const seconds = get('seconds', '4,12').split(',').map(Number);
  if (seconds.length !== 2 || seconds.some((s) => !(s > 0 && s <= 30)))
    throw new Error(`--seconds takes two clip lengths in (0, 30], e.g. 4,12`);
  return {
    runs: int('runs', 20, 2),
    out: resolve(get('out', 'eval/soak.json')),
    seconds,
    maxNewTokens: int('max-new-tokens', 24, 1),
    family: get('family', 'qwen2_audio') as MiniatureFamily,
    port: int('port', 0, 0),
  };
}

/**
 * A copy of the miniature with a heads.json from `wnw calibrate` (its random weights have no
 * calibration of their own), so the soak runs WnW on it too; made once under .cache/soak/.
 */
async function calibratedMiniature(family: MiniatureFamily): Promise<string> {
  const src = join(await ensureMiniatures(), family);
  const dir = join(ROOT, '.cache', 'soak', `${basename(dirname(src))}-${family}`);
  if (existsSync(join(dir, 'heads.json'))) return dir;
  mkdirSync(dir, { recursive: true });
  cpSync(src, dir, { recursive: true });
  const clips = join(dir, '..', `${family}-clips`);
  mkdirSync(clips, { recursive: true });
  const text = 'the quick brown fox';
  const wav = join(clips, 'fox.wav');
  execFileSync('espeak-ng', ['-w', wav, text], { stdio: 'ignore' });
  // Word spans spread evenly over the clip: the Voice Score needs spans, not good ones.
  const seconds = (readFileSync(wav).byteLength - 44) / 2 / 22050;
  const words = text.split(' ');
  writeFileSync(
    join(clips, 'fox.json'),
    JSON.stringify({
      text,
      words: words.map((word, i) => ({
        word,
        start: (i * seconds) / words.length,
        end: ((i + 1) * seconds) / words.length,
        confidence: 1,
      })),
    }),
  );
  execFileSync(
    process.execPath,
    [join(ROOT, 'bin/wnw.mjs'), 'calibrate', '--model', dir, '--clips', clips, '--directions', '1', '--language', 'en'],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  return dir;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createNetServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no free port')),
      );
    });
  });
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;

function line(r: SoakRun): string {
  return (
    `run ${String(r.run).padStart(2)} ${r.model.padEnd(11)} ${r.kvPrecision} ${r.policy.padEnd(6)} ${String(r.seconds).padStart(2)} s ` +
    `${(r.ms / 1000).toFixed(1).padStart(5)} s  ${r.tokens} tokens (${r.stoppedBy})  GPU ${r.gpuBuffers} buffers ${mib(r.gpuBytes)} (ONNX ${mib(r.onnxGpuBytes)})  ` +
    `heap ${r.heapBytes === null ? '?' : mib(r.heapBytes)}  OPFS ${mib(r.opfsBytes)}${r.error ? `  ERROR ${r.error}` : ''}`
  );
}

async function main(): Promise<number> {
  const a = args(process.argv.slice(2));
  const mini = await calibratedMiniature(a.family);
  // Cross-origin isolation lets the page measure its workers' JS memory (measureUserAgentSpecificMemory).
  const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
  // Port 0: one the system finds free (other servers may hold the usual ports). No file
  // watching: an edit in the repository while the soak runs must not reload its page.
  const port = a.port || (await freePort());
  const server = await createServer({
    root: ROOT,
    logLevel: 'error',
    server: { port, strictPort: true, host: '127.0.0.1', headers, hmr: false, watch: null },
  });
  await server.listen();
  const browser = await chromium.launch({
    executablePath: process.env.WNW_CHROMIUM ?? '/usr/bin/chromium',
    // gc() before each measurement, heap sizes that are not bucketed, memory measured at once.
    args: [
      ...chromiumArgs,
      '--js-flags=--expose-gc',
      '--enable-precise-memory-info',
      '--enable-blink-features=ForceEagerMeasureMemory',
    ],
  });
  const t0 = Date.now();
  try {
    const page = await browser.newPage();
    // The ONNX runtime's own warnings (node placement) are not the soak's errors.
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().includes(':onnxruntime:')) console.error('[page]', m.text());
    });
    await page.exposeFunction('wnwSoakProgress', (r: SoakRun) =>
      console.error((r.run === 0 ? 'warm-up ' : '') + line(r)),
    );
    await page.goto(`http://127.0.0.1:${port}/e2e/harness/soak.html`);
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
      timeout: 120_000,
    });
    const warmup = !process.argv.includes('--no-warmup');
    const plan: SoakPlan = {
      runs: a.runs,
      models: [
        { name: 'wnw-ref', load: { model: '/models/wnw-ref', backend: 'webgpu', policy: 'full' } },
        // f16 weights packed at load: the packed decoder goes to the OPFS weight cache.
        {
          name: a.family,
          load: {
            model: '/' + relative(ROOT, mini).split('\\').join('/'),
            backend: 'webgpu',
            policy: 'full',
            weightFormat: 'f16',
          },
        },
      ],
      policies: ['full', 'wnw', 'snapkv', 'quest'],
      precisions: ['f32', 'f16'],
      seconds: a.seconds,
      maxNewTokens: a.maxNewTokens,
      warmup,
    };
    console.error(
      `soak: ${a.runs} runs of ${plan.models.map((m) => m.name).join(' and ')}, KV ${plan.precisions.join('/')}, ${plan.policies.join('/')}, ${a.seconds.join(' s and ')} s clips`,
    );
    const result = (await page.evaluate(
      (p) => (window as unknown as { wnwSoak: { run(p: SoakPlan): Promise<SoakResult> } }).wnwSoak.run(p),
      plan,
    )) as SoakResult;
    console.error(
      `(after loading: GPU ${result.afterLoad.gpuBuffers} buffers ${mib(result.afterLoad.gpuBytes)}, OPFS ${mib(result.afterLoad.opfsBytes)}, in ${(result.loadMs / 1000).toFixed(1)} s)`,
    );
    const verdict: Flatness = flatness(result.runs);
    const out = {
      command: `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim(),
      date: new Date().toISOString(),
      browser: `${browser.version()} (${chromiumArgs.includes('--use-webgpu-adapter=swiftshader') ? 'SwiftShader' : 'GPU'})`,
      wallSeconds: (Date.now() - t0) / 1000,
      plan,
      verdict,
      ...result,
    };
    mkdirSync(dirname(a.out), { recursive: true });
    writeFileSync(a.out, JSON.stringify(out, null, 1) + '\n');
    for (const c of verdict.checks) console.error(`${c.pass ? 'ok  ' : 'FAIL'} ${c.what}`);
    console.error(
      `soak: ${verdict.pass ? 'flat' : 'NOT flat'}; wrote ${relative(process.cwd(), a.out)} (${((Date.now() - t0) / 1000).toFixed(0)} s)`,
    );
    return verdict.pass ? 0 : 1;
  } finally {
    await browser.close();
    await server.close();
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`soak: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(2);
  },
);
