/**
 * The three Hugging Face miniatures (Voxtral: head_dim ≠ hidden/heads; Qwen2-Audio: MHA
 * with q/k/v biases; Qwen2.5-Omni: GQA with biases and an untied head; real vocabularies
 * of 131k–156k entries) loaded in headless Chromium by `loadModel(url)` from the dev
 * server, shards read through HTTP Range requests, then decoded by the WebGPU and the CPU
 * backends: greedy tokens identical for 64 steps, logits close and equal residency, under
 * the full cache and under WnW at r_GPU 0.2 (see e2e/harness/gpu-hf-cases.ts).
 * The miniatures are written here, on the Node side, before the page asks for them.
 */
// This spec converts and reads model folders on disk in Node, as a script that imports wnw/node does.
import '../src/platform/node-host.js';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, expect, type Page } from '@playwright/test';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { ensureMiniatures, MINIATURE_FAMILIES } from '../test/helpers/miniatures.js';
import { convertFolder } from '../src/cli/convert.js';

/** The Voxtral miniature as `npx wnw convert --quant q4` writes it, kept beside the miniatures (as weight-cache.spec.ts keeps it). */
async function convertedVoxtral(dir: string): Promise<void> {
  const out = join(dir, 'converted', 'voxtral-q4');
  if (existsSync(join(out, 'wnw-weights.json'))) return;
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  await convertFolder({ from: join(dir, 'voxtral'), to: tmp, format: 'q4' });
  if (!existsSync(join(out, 'wnw-weights.json'))) renameSync(tmp, out);
  else rmSync(tmp, { recursive: true, force: true });
}

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

test.describe.configure({ mode: 'serial' });

let page: Page;
/** Requests for safetensors shards, and those among them without a Range header. */
const shardRequests = { all: 0, whole: [] as string[] };

test.beforeAll(async ({ browser }) => {
  test.setTimeout(600_000);
  const dir = await ensureMiniatures();
  await convertedVoxtral(dir);
  // The dev server serves the project root, .cache/ included.
  const root =
    '/' +
    relative(fileURLToPath(new URL('..', import.meta.url)), dir)
      .split('\\')
      .join('/');
  page = await browser.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') console.log('[page]', m.text());
  });
  page.on('response', (r) => {
    if (r.status() >= 400) console.log('[page]', r.status(), r.url());
  });
  page.on('request', (r) => {
    if (!r.url().endsWith('.safetensors')) return;
    shardRequests.all++;
    if (r.method() === 'GET' && !r.headers()['range']) shardRequests.whole.push(r.url());
  });
  await page.goto(`/e2e/harness/gpu.html?hf=${encodeURIComponent(root)}`);
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
    timeout: 120_000,
  });
});

/** Runs a harness case in the page and expects it to pass, its detail printed. */
async function check(name: string): Promise<void> {
  const r = await page.evaluate(
    (n) => (window as unknown as { wnwGpu: { run(n: string): Promise<CheckResult> } }).wnwGpu.run(n),
    name,
  );
  console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
  expect(r.pass, r.detail).toBe(true);
}

test.afterAll(async () => {
  await page?.close();
});

for (const family of MINIATURE_FAMILIES) {
  for (const mode of ['full', 'wnw']) {
    const name = `parity_hf_${family}_${mode}`;
    test(`hf ${name}`, async () => {
      await check(name);
    });
  }
}

// Each family once, Voxtral in both formats the backends hold (f32 and q4).
for (const [family, format] of [
  ['voxtral', 'f32'],
  ['voxtral', 'q4'],
  ['qwen2_audio', 'f32'],
  ['qwen2_5_omni', 'q4'],
] as const) {
  const name = `triage_hf_${family}_${format}`;
  test(`hf ${name}: the WebGPU head triage writes the CPU reference's roles`, async () => {
    await check(name);
  });
}

// Voxtral's miniature goes through the same flow in the demo page (e2e/calibrate.spec.ts).
for (const family of ['qwen2_audio', 'qwen2_5_omni'] as const) {
  const name = `calibrate_hf_${family}`;
  test(`hf ${name}: loadTranscriber → calibrate on WebGPU → transcribe with WnW`, async () => {
    await check(name);
  });
}

test("hf triage_memory_voxtral_shape: at Voxtral's widths the triage's GPU peak is the fit check's figure, its values the reference's", async () => {
  await check('triage_memory_voxtral_shape');
});

test('hf parity_hf_voxtral_q4_streamed: a converted folder streamed into the GPU decodes as the CPU does', async () => {
  await check('parity_hf_voxtral_q4_streamed');
});

test('hf shards were read by range, never whole', () => {
  console.log(`safetensors requests: ${shardRequests.all}, without Range: ${shardRequests.whole.length}`);
  expect(shardRequests.all).toBeGreaterThan(0);
  expect(shardRequests.whole, 'shard GETs without a Range header').toEqual([]);
});
