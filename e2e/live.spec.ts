/**
 * The demo's live captions, from Chromium's fake microphone playing a held-out espeak-ng
 * clip (in a loop): the page's own capture (getUserMedia, AudioWorklet), the live recording
 * in the worker, its captions, and the recording it leaves open for the requests panel.
 */
import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromiumArgs } from '../playwright.config.js';
import { cueTimes, download, modelQuery, needsModel } from './demo-page.js';

const SPEECH = join(process.cwd(), 'public', 'test-sets', 'espeak-heldout', 'espeak1.wav');

// Its own browser: the fake microphone plays the clip instead of a beep.
test.use({
  launchOptions: {
    executablePath: process.env.WNW_CHROMIUM ?? '/usr/bin/chromium',
    args: [
      ...chromiumArgs,
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${SPEECH}`,
    ],
  },
});

test.describe('live captions', () => {
  test.beforeEach(needsModel);

  test('captions commit while the microphone plays speech; Stop leaves the recording open for subtitles', async ({
    page,
  }) => {
    test.setTimeout(300_000);
    await page.goto(`/?${modelQuery}`);
    // The full cache on the CPU backend: SwiftShader's WebGPU would be slower still.
    await page.selectOption('#policy', 'full');
    await page.selectOption('#backend', 'cpu');
    await page.click('#live');
    await expect(page.locator('#live')).toHaveAttribute('aria-pressed', 'true');
    const pane = page.locator('[data-pane="live"]');
    // A word commits once two ticks (2 s of audio each) agree on it, or 3 s after it ended.
    await expect(page.locator('#live-committed')).not.toBeEmpty({ timeout: 120_000 });
    await expect(page.locator('#notice')).toBeHidden();
    await expect(pane.locator('.meta')).toContainText(/heard [\d.]+ s · [1-9]\d* ticks/);
    // About 10 s heard, whatever the ticks took.
    await expect
      .poll(async () => Number(await pane.getAttribute('data-heard')), { timeout: 60_000 })
      .toBeGreaterThan(10);
    await page.click('#live');

    await expect(pane).toHaveAttribute('data-done', /done|failed/, { timeout: 120_000 });
    await expect(page.locator('#notice')).toBeHidden();
    await expect(pane).toHaveAttribute('data-done', 'done');
    const text = (await page.locator('#live-committed').innerText()).trim();
    console.log(`live captions (${await pane.locator('.meta').innerText()}): ${text}`);
    expect(text.length).toBeGreaterThan(0);
    // The captions are of the clip the microphone played (the model misspells some words: a few whole ones suffice).
    const reference = new Set(
      readFileSync(SPEECH.replace(/\.wav$/, '.txt'), 'utf8')
        .toLowerCase()
        .split(/\W+/),
    );
    const heard = new Set(
      text
        .toLowerCase()
        .split(/\W+/)
        .filter((w) => w.length >= 4 && reference.has(w)),
    );
    expect(heard.size, `words of the clip in "${text}"`).toBeGreaterThanOrEqual(3);
    await expect(page.locator('#live-tentative')).toBeEmpty();
    await expect(page.locator('#live')).toHaveAttribute('aria-pressed', 'false');

    // The live recording stays open: a transcription on it dates the words for subtitles.
    await expect(page.locator('#requests')).toBeVisible();
    await expect(page.locator('#subtitles-links')).toBeHidden();
    await page.click('#subtitles-make');
    await expect(page.locator('#answers li')).toHaveCount(1, { timeout: 120_000 });
    await expect(page.locator('#notice')).toBeHidden();
    await expect(page.locator('#subtitles-links')).toBeVisible();
    await expect(page.locator('#answers .answer')).not.toHaveText('(no answer)');
    const srt = await download(page, '#subtitles-srt');
    expect(cueTimes(srt.text, ',').length).toBeGreaterThan(0);
  });
});
