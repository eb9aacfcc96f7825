/**
 * Cancel at each of the seven phases (download, convert, upload, compile, encode, prefill at
 * layer k, decode at step s) and device loss at three (compile, prefill, decode), in one page
 * on WebGPU (SwiftShader here) with the shipped reference model: each gives its typed error
 * with the text decoded so far, leaves the page's live GPU buffers at the baseline, and is
 * followed by a run that gives the reference transcript (e2e/harness/lifecycle.ts).
 */
import { test, expect, type Page } from '@playwright/test';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

test.describe.configure({ mode: 'serial' });

let page: Page;

const run = (name: string) =>
  page.evaluate(
    (n) => (window as unknown as { wnwLifecycle: { run(n: string): Promise<CheckResult> } }).wnwLifecycle.run(n),
    name,
  );

test.beforeAll(async ({ browser }) => {
  test.setTimeout(300_000);
  page = await browser.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') console.log('[page]', m.text());
  });
  await page.goto('/e2e/harness/lifecycle.html');
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
    timeout: 120_000,
  });
  const r = await run('setup');
  console.log(`setup: ${r.detail} (${Math.round(r.ms)} ms)`);
  expect(r.pass, r.detail).toBe(true);
});

test.afterAll(async () => {
  await page?.close();
});

// The load cases first, in a page with no transcriber; then one transcriber for the rest.
const CASES = [
  'cancel_download',
  'cancel_convert',
  'cancel_upload',
  'cancel_compile',
  'lost_compile',
  'cancel_upload_in_worker',
  'cancel_encode',
  'cancel_prefill_layer_2',
  'cancel_decode_step_3',
  'lost_prefill_layer_2',
  'lost_decode_step_3',
];

for (const name of CASES) {
  test(name, async () => {
    const r = await run(name);
    console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
    expect(r.pass, r.detail).toBe(true);
  });
}
