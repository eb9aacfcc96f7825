/**
 * Runs named checks of the GPU harness page (e2e/harness/gpu.html) as Playwright tests,
 * one page for the whole file (pipelines compile once). A check whose detail starts with
 * SKIP is reported as skipped with that reason.
 */
import { test, expect, type Page } from '@playwright/test';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

export function gpuChecks(prefix: string, checks: string[]): void {
  test.describe.configure({ mode: 'serial' });
  let page: Page;
  test.beforeAll(async ({ browser }) => {
    page = await browser.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') console.log('[page]', m.text());
    });
    await page.goto('/e2e/harness/gpu.html');
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
      timeout: 120_000,
    });
  });
  test.afterAll(async () => {
    await page?.close();
  });
  for (const name of checks) {
    test(`${prefix} ${name}`, async () => {
      const r = await page.evaluate(
        (n) => (window as unknown as { wnwGpu: { run(n: string): Promise<CheckResult> } }).wnwGpu.run(n),
        name,
      );
      console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
      test.skip(r.detail.startsWith('SKIP'), r.detail);
      expect(r.pass, r.detail).toBe(true);
    });
  }
}
