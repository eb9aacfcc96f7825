/**
 * The whole decoder on WebGPU (headless Chromium, SwiftShader here) against the CPU
 * backend: identical greedy tokens for 64 decode steps after a prefill of > 1,000 audio
 * tokens, the same prefill plan and mid-decode recall/release plans on both, exported
 * weights and queries within attention tolerance, and per-step resource counters
 * (buffers and bind groups constant, one submit per step). The shipped-model cases
 * compare both backends with the training code's golden tokens; they skip until
 * public/models/wnw-ref and its fixtures exist.
 */
import { test, expect, type Page } from '@playwright/test';

interface CheckResult { name: string; pass: boolean; detail: string; ms: number }

const CHECKS = ['context_too_long', 'bench_smoke', 'parity_reference_random', 'parity_shipped_clip1', 'parity_shipped_clip2'];

test.describe.configure({ mode: 'serial' });

let page: Page;

test.beforeAll(async ({ browser }) => {
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.log('[page]', m.text()); });
  await page.goto('/e2e/harness/gpu.html');
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, { timeout: 120_000 });
});

test.afterAll(async () => {
  await page?.close();
});

for (const name of CHECKS) {
  test(`decoder ${name}`, async () => {
    const r = await page.evaluate((n) => (window as unknown as { wnwGpu: { run(n: string): Promise<CheckResult> } }).wnwGpu.run(n), name);
    console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
    test.skip(r.detail.startsWith('SKIP'), r.detail);
    expect(r.pass, r.detail).toBe(true);
  });
}
