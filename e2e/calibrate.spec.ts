/**
 * "Calibrate for WnW" in the demo page, as a person would do it: a Hugging Face folder
 * without heads.json, picked from disk, cannot run WnW; the page calibrates it (one clip of
 * the site's calibration set, one direction per head: the smallest run that goes through
 * every stage) in a worker of its own, showing progress per clip and per head and the time
 * left; WnW then runs; after a reload the same folder goes straight to WnW with the heads
 * stored in the browser, and no calibration starts. One page, one browser context (the
 * stored heads live in its private storage).
 */
import { expect, test, type Page } from '@playwright/test';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureMiniatures } from '../test/helpers/miniatures.js';
import { wavHead } from './demo-page.js';

/** Picks the folder as the directory input would, and waits for the panel's verdict on its heads. */
async function pickFolder(page: Page, folder: string, state: string): Promise<void> {
  await page.setInputFiles('#model-dir', folder);
  await expect(page.locator('#model-info [data-key="family"]')).toContainText('voxtral (Hugging Face)', {
    timeout: 30_000,
  });
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', state, { timeout: 30_000 });
}

/** A 3 s clip, WnW at 0.2 on the CPU backend, to the end of the run. */
async function runWnw(page: Page): Promise<void> {
  await page.setInputFiles('#file-input', {
    name: 'sample1-head.wav',
    mimeType: 'audio/wav',
    buffer: wavHead('samples/sample1.wav', 3),
  });
  await expect(page.locator('#start')).toBeEnabled({ timeout: 60_000 });
  await page.selectOption('#policy', 'wnw');
  await page.selectOption('#budget', '0.2');
  await page.selectOption('#backend', 'cpu');
  await page.click('#start');
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', /done|partial|failed/, {
    timeout: 180_000,
  });
}

test('a picked Hugging Face folder without heads.json is calibrated in the page, runs WnW, and after a reload uses the stored heads', async ({
  page,
}) => {
  test.setTimeout(300_000);
  // Voxtral's miniature: 2 layers × 4 KV heads, the smallest decoder of the three.
  const folder = join(await ensureMiniatures(), 'voxtral');
  expect(existsSync(join(folder, 'heads.json')), 'the miniature must come without heads.json').toBe(false);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const workers: string[] = [];
  page.on('worker', (w) => workers.push(w.url()));
  await page.goto('/');
  await pickFolder(page, folder, 'none');
  await expect(page.locator('#calibrate-offer')).toBeVisible();
  await expect(page.locator('#calibrate-state')).toContainText('no heads.json');

  // Before calibrating, WnW is refused with the reason (the full cache would run).
  await runWnw(page);
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'failed');
  await expect(page.locator('#notice')).toContainText('heads.json');

  // Every progress text the panel shows, recorded as it changes.
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as unknown as { calibrationTexts: string[] }).calibrationTexts = seen;
    const watch = (id: string) =>
      new MutationObserver(() => seen.push(`${id}: ${document.getElementById(id)!.textContent}`)).observe(
        document.getElementById(id)!,
        { childList: true, characterData: true, subtree: true },
      );
    watch('calibrate-run-text');
    watch('calibrate-heads-text');
  });
  await page.selectOption('#calibrate-count', '1');
  await page.selectOption('#calibrate-directions', '1');
  // 2 layers × 4 KV heads, one direction: 2 + 1 · 4 · (2 + 1) / 2 = 8 forwards per clip.
  await expect(page.locator('#calibrate-expect')).toContainText('Each clip costs 8 forwards');
  const t0 = Date.now();
  await page.click('#calibrate-start');
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', /stored|unstored|none/, { timeout: 180_000 });
  console.log(`calibration in the page: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', 'stored');
  await expect(page.locator('#calibrate-state')).toContainText('stored in this browser');
  await expect(page.locator('#calibrate-download')).toBeVisible();
  // Off the main thread: in the calibration worker.
  expect(workers.filter((u) => u.includes('calibrate/worker'))).toHaveLength(1);
  const texts = await page.evaluate(() => (window as unknown as { calibrationTexts: string[] }).calibrationTexts);
  // Per head: every one of the 8 KV heads reported in turn; per clip, with the time left once a forward was timed.
  for (let h = 1; h <= 8; h++) expect(texts).toContain(`calibrate-heads-text: ${h} of 8`);
  expect(
    texts.some((t) => /^calibrate-run-text: clip 1 of 1 \(calib001\) · \d+ % · about [\d.:]+ (s|min) left$/.test(t)),
    texts.join('\n'),
  ).toBe(true);

  // WnW now runs on the same loaded page.
  await runWnw(page);
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'done');
  await expect(page.locator('[data-pane="main"] h3')).toContainText('WnW');
  await expect(page.locator('[data-pane="main"] .meta')).toContainText(/\b[1-9]\d* tokens/);

  // A later visit: the same folder goes straight to WnW with the stored heads, no calibration.
  await page.reload();
  const before = workers.length;
  await pickFolder(page, folder, 'stored');
  await expect(page.locator('#calibrate-offer')).toBeHidden();
  await runWnw(page);
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'done');
  await expect(page.locator('#notice')).toBeHidden();
  expect(workers.slice(before).filter((u) => u.includes('calibrate/worker'))).toEqual([]);
  expect(errors).toEqual([]);
});
