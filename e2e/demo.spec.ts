/**
 * The demo page and the example page, driven as a person would, in headless Chromium on
 * SwiftShader (a CPU Vulkan: slow, so one compare run covers both policies).
 * Tests that need the reference model skip, saying why, until public/models/wnw-ref holds it.
 */
import { expect, test } from '@playwright/test';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { wer } from '../src/eval/wer.js';
import { chromiumArgs } from '../playwright.config.js';
import { ensureMiniatures } from '../test/helpers/miniatures.js';
import {
  chooseSample,
  cueTimes,
  download,
  modelQuery,
  needsModel,
  paneTokens,
  samples,
  shortestClip,
  sixtySecondClip,
  tideInk,
  transcribeHead,
} from './demo-page.js';

/*
 * WER ceilings for a ~60 s held-out espeak-ng clip, from the shipped model's measured
 * accuracy: public/models/wnw-ref/accuracy.json is the eval report of the full cache on
 * public/test-sets/espeak-heldout (npm run eval -- --data public/test-sets/espeak-heldout
 * --policies full --out public/models/wnw-ref/accuracy.json). The full cache may be 5
 * points worse than that pooled WER on one clip, WnW at 0.2 another 5 (the method doc:
 * within about a point). A model whose held-out WER is above MODEL_GATE does not
 * transcribe yet: the WER checks are then skipped, saying so, and everything else runs.
 */
const ACCURACY = join('public', 'models', 'wnw-ref', 'accuracy.json');
const MODEL_GATE = 0.5;
const measuredWer: number | null = existsSync(ACCURACY)
  ? ((JSON.parse(readFileSync(ACCURACY, 'utf8')) as { summary: Array<{ policy: string; wer: number }> }).summary.find(
      (r) => r.policy === 'full',
    )?.wer ?? null)
  : null;
const FULL_WER_MAX = (measuredWer ?? 0.1) + 0.05;
const WNW_WER_MAX = FULL_WER_MAX + 0.05;
const accuracyGate = () =>
  test.skip(
    measuredWer === null || measuredWer > MODEL_GATE,
    measuredWer === null
      ? `no measured accuracy for the shipped model (${ACCURACY})`
      : `the shipped reference model does not transcribe yet: held-out WER ${(measuredWer * 100).toFixed(1)} % > ${MODEL_GATE * 100} % (see its MODEL_CARD); WER ceilings wait for a trained model`,
  );
const WNW_BUDGET = '0.2';

// Chromium's fake capture device (a beep) with permission granted, for the microphone test; nothing else records.
test.use({
  launchOptions: {
    executablePath: process.env.WNW_CHROMIUM ?? '/usr/bin/chromium',
    args: [...chromiumArgs, '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream'],
  },
});

test.describe('demo page without a model', () => {
  test('an unsupported file shows a plain-language error', async ({ page }) => {
    await page.goto('/');
    await page.setInputFiles('#file-input', {
      name: 'notes.txt',
      mimeType: 'text/plain',
      buffer: Buffer.from('this is not audio'),
    });
    const notice = page.locator('#notice');
    await expect(notice).toBeVisible();
    await expect(notice).toHaveAttribute('data-code', 'BAD_AUDIO');
    await expect(notice).toContainText('This audio cannot be transcribed');
    await expect(notice).toContainText(/WAV/);
    await expect(page.locator('#start')).toBeDisabled();
  });

  test('an empty file says it is empty', async ({ page }) => {
    await page.goto('/');
    await page.setInputFiles('#file-input', { name: 'empty.wav', mimeType: 'audio/wav', buffer: Buffer.alloc(0) });
    await expect(page.locator('#notice')).toHaveAttribute('data-code', 'BAD_AUDIO');
    await expect(page.locator('#notice')).toContainText(/empty/i);
  });

  test('without WebGPU the page says which browsers work and switches to the CPU backend', async ({ page }) => {
    await page.addInitScript(() => Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined }));
    await page.goto('/');
    await expect(page.locator('#notice')).toContainText('No WebGPU in this browser');
    await expect(page.locator('#notice')).toContainText(/Chrome and Edge 113/);
    await expect(page.locator('#backend')).toHaveValue('cpu');
    await expect(page.locator('#backend-readout')).toContainText('CPU');
  });

  test('a model that is not there is reported, through the worker, with what to check', async ({ page }) => {
    const clip = (await samples(page)).find((x) => x.seconds);
    test.skip(!clip, 'no sample clips to start a run with');
    await page.goto('/?model=/models/not-there/');
    await chooseSample(page, clip!.url);
    await page.click('#start');
    const notice = page.locator('#notice');
    await expect(notice).toHaveAttribute('data-code', 'MODEL_LOAD', { timeout: 60_000 });
    await expect(notice).toContainText('The model could not be loaded');
    await expect(notice).toContainText('not-there/config.json');
    await expect(page.locator('#start')).toBeEnabled();
  });

  test('a Hugging Face folder chosen from disk loads in the page and transcribes', async ({ page }) => {
    test.setTimeout(300_000);
    // Voxtral's miniature tokenizer covers its whole vocabulary, so random weights still spell text.
    const folder = join(await ensureMiniatures(), 'voxtral');
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto('/');
    // The directory input, as a person choosing the folder in the browser's picker.
    await page.setInputFiles('#model-dir', folder);
    await expect(page.locator('#model-name')).toContainText('voxtral');
    // Read from config.json before any weight: family, layers, format, bytes, and a fit verdict.
    await expect(page.locator('#model-info [data-key="family"]')).toContainText('voxtral (Hugging Face)', {
      timeout: 30_000,
    });
    await expect(page.locator('#model-info [data-key="layers"]')).toContainText(/^\d+ \(hidden \d+/);
    await expect(page.locator('#model-info [data-key="format"]')).toContainText('f32');
    await expect(page.locator('#model-info [data-key="weights"]')).toContainText(/\d (KiB|MiB)/);
    await expect(page.locator('#model-info [data-key="runs"]')).toContainText('in this page');
    // The verdict sizes both phases, prefill and decoding, and names the larger as the peak.
    await expect(page.locator('#model-fit')).toContainText(
      /Needs .* of f32 weights \+ .* while prefilling \(.*KV pool.*\) or .* while decoding \(the KV pool .*\) = .* at the peak/,
    );

    await transcribeHead(page, 4);
    await expect(page.locator('#progress-download')).toHaveJSProperty('value', 1);
    // Bytes read from the folder: the weights were sliced out of it, not more than it holds.
    const read = /([0-9.]+) (KiB|MiB) of ([0-9.]+) MiB read/.exec(
      await page.locator('#progress-download-text').innerText(),
    );
    expect(read, 'no bytes-read readout on the download phase').not.toBeNull();
    const mib = (v: string, u: string) => Number(v) / (u === 'KiB' ? 1024 : 1);
    expect(mib(read![1], read![2])).toBeGreaterThan(0);
    expect(mib(read![1], read![2])).toBeLessThanOrEqual(Number(read![3]));
    await expect(page.locator('[data-pane="main"] .meta')).toContainText(/\b[1-9]\d* tokens/);
    // Random weights: any text, but text.
    expect((await page.locator('#transcript-main').innerText()).trim().length).toBeGreaterThan(0);
    await expect(page.locator('#backend-readout')).toContainText(/CPU/i);

    // The recording stays open: a question and a follow-up reuse the audio (and then the conversation).
    await expect(page.locator('#requests')).toBeVisible();
    await expect(page.locator('#translate-form')).toBeVisible();
    for (const [i, q] of ['What is said?', 'Who says it?'].entries()) {
      await page.fill('#ask-question', q);
      await page.click('#ask');
      await expect(page.locator('#answers li')).toHaveCount(i + 1, { timeout: 120_000 });
    }
    const reused = await page
      .locator('#answers [data-reused]')
      .evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.reused)));
    expect(reused[0]).toBeGreaterThan(0);
    expect(reused[1]).toBeGreaterThan(reused[0]);
    await expect(page.locator('#answers li').first()).toContainText('Q: What is said?');
    expect(errors).toEqual([]);
  });

  test('a model folder the site serves, given by URL, loads in the worker and transcribes', async ({ page }) => {
    test.setTimeout(300_000);
    const url =
      '/' +
      relative(process.cwd(), join(await ensureMiniatures(), 'qwen2_audio'))
        .split('\\')
        .join('/');
    await page.goto('/');
    await page.fill('#model-url', url);
    await page.click('#model-url-form button[type="submit"]');
    await expect(page.locator('#model-info [data-key="family"]')).toContainText('qwen2_audio (Hugging Face)', {
      timeout: 30_000,
    });
    await expect(page.locator('#model-info [data-key="runs"]')).toContainText('background worker');
    await transcribeHead(page, 3);
    // Its miniature tokenizer spells only a few hundred of the 156k ids: the tokens are counted, not the text.
    await expect(page.locator('[data-pane="main"] .meta')).toContainText(/\b[1-9]\d* tokens/);
    // The loader's own byte count of the decoder's tensors read (a URL: no local reader counts them).
    await expect(page.locator('#progress-download-text')).toContainText(/^100 % · [0-9.]+ MiB of [0-9.]+ MiB$/);
    // Back to the shipped model: the panel forgets the folder.
    await page.click('#model-shipped');
    await expect(page.locator('#model-name')).toHaveText('the shipped model');
    await expect(page.locator('#model-info')).toBeHidden();
  });

  test('lists the shipped sample clips', async ({ page }) => {
    await page.goto('/');
    const list = await samples(page);
    test.skip(list.length === 0, 'no clips under public/samples or public/test-sets');
    await expect(page.locator('#sample-select option')).toHaveCount(list.length);
  });
});

test('the tide chart draws decode steps (synthetic steps, no model)', async ({ page }) => {
  await page.goto('/e2e/harness/tide.html');
  await expect(page.locator('body')).toHaveAttribute('data-done', '1');
  const chart = await tideInk(page);
  expect(chart.rows).toBe(120);
  expect(chart.ink).toBeGreaterThanOrEqual(0.9 * chart.expected);
  // Teal (on GPU), slate (on CPU) and amber (anchors), blended: many distinct colours.
  expect(chart.colours).toBeGreaterThan(5);
  await page.locator('#tide').screenshot({ path: 'test-results/tide-chart.png' });
});

test("the tide chart's placeholder goes once the first step is drawn", async ({ page }) => {
  await page.goto('/e2e/harness/tide.html?steps=1');
  await expect(page.locator('body')).toHaveAttribute('data-done', '1');
  // Above the one row drawn, the plot is the empty colour only: no placeholder text left.
  const stray = await page.evaluate(() => {
    const c = document.getElementById('tide') as HTMLCanvasElement;
    const above = Number(c.dataset.plotHeight) - Number(c.dataset.rowHeight);
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, above).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
      if (Math.abs(d[i] - 15) + Math.abs(d[i + 1] - 23) + Math.abs(d[i + 2] - 42) > 24) n++;
    return n;
  });
  expect(stray).toBe(0);
});

test.describe('microphone', () => {
  test('a recording becomes the clip to transcribe', async ({ page }) => {
    await page.goto('/');
    await page.click('#record');
    await expect(page.locator('#record')).toHaveAttribute('aria-pressed', 'true');
    await page.waitForTimeout(2500);
    await page.click('#record');
    await expect(page.locator('#clip-name')).toContainText(/Recording .* — \d/, { timeout: 30_000 });
    await expect(page.locator('#start')).toBeEnabled();
  });
});

test.describe('demo page with the reference model', () => {
  test.describe.configure({ mode: 'serial' });
  test.beforeEach(needsModel);
  /** WERs of the compare run, checked by the next test against the ceilings. */
  let compared: { werFull: number; werWnw: number } | null = null;

  test('compare mode runs the full cache and WnW at 0.2 on a 60 s clip; progress, streaming text and the tide chart show', async ({
    page,
  }) => {
    // Two decodes of ~60 s of audio on SwiftShader (CPU-emulated GPU).
    test.setTimeout(1_200_000);
    const clip = await sixtySecondClip(page);
    const reference = readFileSync(join('public', clip.reference!), 'utf8');
    await page.goto(`/?${modelQuery}`);
    await chooseSample(page, clip.url);
    await page.selectOption('#policy', 'wnw');
    await page.selectOption('#budget', WNW_BUDGET);
    // WebGPU explicitly: 'auto' passes over SwiftShader (a software adapter) for the CPU backend.
    await page.selectOption('#backend', 'webgpu');
    await page.check('#compare');
    await page.click('#start');

    // Progress: the model phases complete, then decoding reports audio covered.
    await expect(page.locator('#progress-compile')).toHaveJSProperty('value', 1, { timeout: 300_000 });
    await expect
      .poll(() => page.locator('#progress-decode').evaluate((e) => (e as HTMLProgressElement).value), {
        timeout: 300_000,
      })
      .toBeGreaterThan(0);
    await expect(page.locator('#backend-readout')).toContainText(/WebGPU/);
    // Tokens stream into the first pane before its run ends.
    await expect(page.locator('#transcript-full')).not.toBeEmpty({ timeout: 300_000 });

    await expect(page.locator('[data-pane="wnw"]')).toHaveAttribute('data-done', 'done', { timeout: 1_100_000 });
    await expect(page.locator('[data-pane="full"]')).toHaveAttribute('data-done', 'done');
    const full = await page.locator('#transcript-full').innerText();
    const wnw = await page.locator('#transcript-wnw').innerText();
    const werFull = wer(reference, full);
    const werWnw = wer(reference, wnw);
    console.log(
      `${clip.url}: WER full ${(werFull * 100).toFixed(1)} %, WnW@${WNW_BUDGET} ${(werWnw * 100).toFixed(1)} %`,
    );
    compared = { werFull, werWnw };
    expect(full.trim().length).toBeGreaterThan(0);
    expect(wnw.trim().length).toBeGreaterThan(0);
    // The page's own WER readout agrees with ours.
    expect(Number(await page.locator('[data-pane="wnw"] [data-wer]').getAttribute('data-wer'))).toBeCloseTo(werWnw, 6);
    // WnW at 0.2 keeps less KV on the GPU than the full cache.
    await expect(page.locator('#status')).toContainText(/Compared: GPU KV memory/);
    console.log(
      `${clip.url}: ${await paneTokens(page, 'wnw')} WnW tokens against ${await paneTokens(page, 'full')} of the full cache`,
    );

    // One row per decode step of the WnW run: the rows drawn cover the plot as far as they reach.
    const chart = await tideInk(page);
    expect(chart.rows).toBeGreaterThan(0);
    expect(chart.ink).toBeGreaterThanOrEqual(0.9 * chart.expected);
    expect(chart.colours).toBeGreaterThan(2);

    // The recording stays open: its subtitles download as SRT and WebVTT, cue after cue in order.
    await expect(page.locator('#requests')).toBeVisible();
    // The reference model only transcribes: no question, no translation offered.
    await expect(page.locator('#ask-form')).toBeHidden();
    await expect(page.locator('#translate-form')).toBeHidden();
    const srt = await download(page, '#subtitles-srt');
    const vtt = await download(page, '#subtitles-vtt');
    expect(srt.name).toBe('transcript.srt');
    expect(vtt.name).toBe('transcript.vtt');
    expect(vtt.text.startsWith('WEBVTT')).toBe(true);
    const cues = cueTimes(srt.text, ',');
    expect(cues.length).toBeGreaterThan(1);
    expect(cueTimes(vtt.text, '.')).toEqual(cues);
    cues.forEach(([a, b], i) => {
      expect(b).toBeGreaterThan(a);
      if (i) expect(a).toBeGreaterThanOrEqual(cues[i - 1][1]);
    });
  });

  test("the compare run is within the WER ceilings derived from the model's measured accuracy", () => {
    accuracyGate();
    expect(compared, 'the compare run above did not finish').not.toBeNull();
    expect(compared!.werFull).toBeLessThanOrEqual(FULL_WER_MAX);
    expect(compared!.werWnw).toBeLessThanOrEqual(WNW_WER_MAX);
  });
});

// Independent of the compare run: they run even when it fails.
test.describe('the reference model, beyond the compare run', () => {
  test.beforeEach(needsModel);
  /** WER of the example page's transcript, checked against the ceiling by the test after it. */
  let exampleWer: number | null = null;

  test("the demo's sample at the page's defaults (WnW at 0.2): at least 90 % of the full cache's tokens", async ({
    page,
  }) => {
    // Two decodes of a 32 s clip on SwiftShader.
    test.setTimeout(900_000);
    const sample = (await samples(page)).find((x) => x.group === 'samples' && x.reference);
    expect(sample, 'no sample clip with a reference under public/samples').toBeTruthy();
    await page.goto(`/?${modelQuery}`);
    await chooseSample(page, sample!.url);
    // The page's defaults: WnW at 0.2; WebGPU explicitly, as 'auto' passes over SwiftShader.
    await expect(page.locator('#policy')).toHaveValue('wnw');
    await expect(page.locator('#budget')).toHaveValue(WNW_BUDGET);
    await page.selectOption('#backend', 'webgpu');
    await page.check('#compare');
    await page.click('#start');
    await expect(page.locator('[data-pane="wnw"]')).toHaveAttribute('data-done', 'done', { timeout: 850_000 });
    await expect(page.locator('[data-pane="full"]')).toHaveAttribute('data-done', 'done');
    const [full, wnw] = [await paneTokens(page, 'full'), await paneTokens(page, 'wnw')];
    const vsFull = wer(
      await page.locator('#transcript-full').innerText(),
      await page.locator('#transcript-wnw').innerText(),
    );
    console.log(
      `${sample!.url}: WnW ${wnw} tokens, the full cache ${full}; WER of WnW against the full cache's transcript ${(vsFull * 100).toFixed(1)} %`,
    );
    expect(full).toBeGreaterThan(0);
    expect(wnw).toBeGreaterThanOrEqual(0.9 * full);
  });

  test('cancel keeps the partial transcript, and the next run works', async ({ page }) => {
    // A clip long enough that decoding runs for a while (on a short one a model may stop after a word).
    const clip = await sixtySecondClip(page);
    await page.goto(`/?${modelQuery}`);
    await chooseSample(page, clip.url);
    await page.selectOption('#policy', 'wnw');
    await page.click('#start');
    const text = page.locator('#transcript-main');
    // Cancel from inside the page the moment the first text streams in: decoding can take only
    // seconds, less than a poll from the test runner may lag. A run that ends first is reported, not waited on.
    const seen = await page.evaluate(
      () =>
        new Promise<string>((resolve) => {
          const t = document.getElementById('transcript-main')!;
          const pane = document.querySelector('[data-pane="main"]')!;
          const obs = new MutationObserver(() => {
            if ((t.textContent ?? '').trim().length > 0) {
              obs.disconnect();
              (document.getElementById('cancel') as HTMLButtonElement).click();
              resolve(t.textContent ?? '');
            } else if (pane.getAttribute('data-done')) {
              obs.disconnect();
              resolve(`ended (${pane.getAttribute('data-done')}) before any text`);
            }
          });
          obs.observe(t, { childList: true, characterData: true, subtree: true });
          obs.observe(pane, { attributes: true, attributeFilter: ['data-done'] });
        }),
    );
    expect(seen, 'the run ended before it could be cancelled').not.toMatch(/^ended \(/);
    await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'partial', { timeout: 60_000 });
    await expect(page.locator('#notice')).toHaveAttribute('data-code', 'CANCELLED');
    await expect(page.locator('#notice')).toContainText('transcript so far is kept');
    // What had streamed in when cancel was pressed is still there.
    expect((await text.innerText()).trim().length).toBeGreaterThanOrEqual(seen.trim().length);
    // A cancel may have stopped the worker by force (CPU backend mid-step): the next run reloads it.
    // The shortest clip shows that as well as the long one would, in a fraction of the time.
    await expect(page.locator('#start')).toBeEnabled();
    await chooseSample(page, (await shortestClip(page)).url);
    await page.click('#start');
    await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'done', { timeout: 500_000 });
  });

  test('with the f16 KV pool the page transcribes on WebGPU in half the GPU KV memory of f32', async ({ page }) => {
    test.setTimeout(900_000);
    const shortest = await shortestClip(page);
    await page.goto(`/?${modelQuery}`);
    await chooseSample(page, shortest.url);
    await page.selectOption('#policy', 'full');
    await page.selectOption('#backend', 'webgpu');
    const kib = async () => {
      const t = (await page.locator('#stat-gpuKv').innerText()).trim();
      const m = /^([0-9.]+) (KiB|MiB|GiB)$/.exec(t);
      expect(m, `GPU KV readout "${t}"`).not.toBeNull();
      return Number(m![1]) * { KiB: 1, MiB: 1024, GiB: 1024 ** 2 }[m![2] as 'KiB' | 'MiB' | 'GiB'];
    };
    const used: Record<string, number> = {};
    for (const kv of ['f32', 'f16']) {
      await page.selectOption('#kv', kv);
      await page.click('#start');
      await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'done', { timeout: 400_000 });
      expect((await page.locator('#transcript-main').innerText()).trim().length).toBeGreaterThan(0);
      await expect(page.locator('#backend-readout')).toContainText(/WebGPU/);
      used[kv] = await kib();
    }
    // Keys and values take half the bytes; each slot's 4-byte position does not shrink.
    console.log(`GPU KV memory: f32 ${used.f32} KiB, f16 ${used.f16} KiB`);
    expect(used.f16 / used.f32).toBeGreaterThan(0.45);
    expect(used.f16 / used.f32).toBeLessThan(0.56);
  });

  test('the example page imports the ES module and transcribes a clip', async ({ page }) => {
    const shortest = await shortestClip(page);
    await page.goto(`/example.html?clip=/${shortest.url}&${modelQuery}`);
    await expect(page.locator('body')).toHaveAttribute('data-state', /done|error/, { timeout: 590_000 });
    await expect(page.locator('#status')).toContainText('Done');
    const text = await page.locator('#out').innerText();
    expect(text.trim().length).toBeGreaterThan(0);
    const reference = readFileSync(join('public', shortest.reference!), 'utf8');
    const w = wer(reference, text);
    console.log(`example page: WER ${(w * 100).toFixed(1)} %`);
    exampleWer = w;
  });

  test("the example page's transcript is within the WER ceiling derived from the model's measured accuracy", () => {
    accuracyGate();
    expect(exampleWer, 'the example page test above did not finish').not.toBeNull();
    expect(exampleWer!).toBeLessThanOrEqual(WNW_WER_MAX);
  });
});
