/**
 * Transcription from the Hugging Face miniatures in headless Chromium: WAV samples →
 * Whisper front-end → audio tower and projector → the family's prompt → decoder, on WebGPU
 * and on the CPU backend: embeddings within NMSE 1e-6, greedy tokens identical
 * (e2e/harness/gpu-transcribe.ts).
 */
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, expect, type Page } from '@playwright/test';
import { ensureMiniatures, MINIATURE_FAMILIES } from '../test/helpers/miniatures.js';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

test.describe.configure({ mode: 'serial' });

let page: Page;

test.beforeAll(async ({ browser }) => {
  test.setTimeout(600_000);
  const dir = await ensureMiniatures();
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
    if (r.status() >= 400 && !r.url().endsWith('.json')) console.log('[page]', r.status(), r.url());
  });
  await page.goto(`/e2e/harness/gpu-transcribe.html?hf=${encodeURIComponent(root)}`);
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
    timeout: 120_000,
  });
});

test.afterAll(async () => {
  await page?.close();
});

// Each family with f32 weights, and one with the audio tower and decoder in 4-bit.
for (const name of [...MINIATURE_FAMILIES.map((f) => `transcribe_hf_${f}`), 'transcribe_hf_qwen2_5_omni_q4']) {
  test(name, async () => {
    const r = await page.evaluate(
      (n) => (window as unknown as { wnwTranscribe: { run(n: string): Promise<CheckResult> } }).wnwTranscribe.run(n),
      name,
    );
    console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
    expect(r.pass, r.detail).toBe(true);
  });
}
