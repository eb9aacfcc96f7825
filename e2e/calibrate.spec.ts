/**
 * "Calibrate for WnW" in the demo page, as a person would do it: a Hugging Face folder
 * without heads.json, picked from disk, cannot run WnW; the page triages its heads on the
 * WebGPU backend (the transcriber's own, SwiftShader here) from four clips of the site's
 * calibration set, stating the cost first and showing progress per clip with the time left;
 * stopped after its first clips, it resumes from them; WnW then runs on the same
 * transcriber; after a reload the same folder goes straight to WnW with the heads stored in
 * the browser, and no triage starts. One page, one browser context (the stored heads live in
 * its private storage).
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

/** A 3 s clip, WnW at 0.2 on the WebGPU backend, to the end of the run. */
async function runWnw(page: Page): Promise<void> {
  await page.setInputFiles('#file-input', {
    name: 'sample1-head.wav',
    mimeType: 'audio/wav',
    buffer: wavHead('samples/sample1.wav', 3),
  });
  await expect(page.locator('#start')).toBeEnabled({ timeout: 60_000 });
  await page.selectOption('#policy', 'wnw');
  await page.selectOption('#budget', '0.2');
  await page.selectOption('#backend', 'webgpu');
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
    // Each text as it was set: several may be set in one task, before the observer runs.
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) seen.push(n.textContent ?? '');
    }).observe(document.getElementById('calibrate-run-text')!, { childList: true });
  });
  const texts = () => page.evaluate(() => (window as unknown as { calibrationTexts: string[] }).calibrationTexts);
  await page.selectOption('#backend', 'webgpu');
  await page.selectOption('#calibrate-count', '4');
  // One teacher-forced forward a clip and its answer rows' backward, whatever the heads.
  await expect(page.locator('#calibrate-expect')).toContainText('Each clip costs one teacher-forced forward');
  await expect(page.locator('#calibrate-expect')).toContainText('4 forwards for 4 clips');
  const t0 = Date.now();
  await page.click('#calibrate-start');
  // Stopped once the first clip is done: the clip under way finishes, the next ones do not start.
  await expect(page.locator('#calibrate-run-text')).toContainText(/clip 1 of 4 \(calib001\) · \d+ %/, {
    timeout: 180_000,
  });
  await page.click('#calibrate-stop');
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', 'none', { timeout: 180_000 });
  await expect(page.locator('#calibrate-run-text')).toContainText('stopped: the finished clips are kept');
  const stoppedAt = (await texts()).filter((t) => / · \d+ % · /.test(t)).at(-1)!;
  const kept = Number(/^clip (\d) of 4/.exec(stoppedAt)![1]);
  expect(kept, stoppedAt).toBeLessThan(4);
  // Resumed: the kept clips are not computed again.
  await page.click('#calibrate-start');
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', /stored|unstored|none/, { timeout: 180_000 });
  console.log(
    `triage in the page (4 clips, stopped after ${kept} and resumed): ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  await expect(page.locator('#calibrate')).toHaveAttribute('data-state', 'stored');
  await expect(page.locator('#calibrate-state')).toContainText('stored in this browser');
  await expect(page.locator('#calibrate-download')).toBeVisible();
  const all = await texts();
  for (let i = 1; i <= kept; i++)
    expect(
      all.some((t) => t.startsWith(`clip ${i} of 4 (calib00${i}) · kept from the stopped run`)),
      all.join('\n'),
    ).toBe(true);
  expect(
    all.some((t) => t.startsWith(`clip ${kept + 1} of 4 (calib00${kept + 1}) · kept`)),
    all.join('\n'),
  ).toBe(false);
  expect(
    all.some((t) => /^clip [1-4] of 4 \(calib00[1-4]\) · \d+ % · about [\d.:]+ (s|min) left$/.test(t)),
    all.join('\n'),
  ).toBe(true);
  // On the transcriber's WebGPU backend: the page ran no worker of its own for it.
  expect(workers.filter((u) => /calibrat/.test(u))).toEqual([]);

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
  expect(workers.slice(before).filter((u) => /calibrat/.test(u))).toEqual([]);
  // No triage ran after the reload.
  await expect(page.locator('#calibrate-progress')).toBeHidden();
  expect(errors).toEqual([]);
});
