/**
 * The demo page's Playwright helpers (Node side): the model the tests load, sample clips
 * the page lists, choosing one, the tide chart's ink, a short full-cache run, a WAV cut to its first seconds.
 */
import { expect, test, type Page } from '@playwright/test';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SampleEntry } from '../src/ui/samples-plugin.js';

/** WNW_E2E_MODEL: another model folder, as a URL path the dev server serves (e.g. to try a new checkpoint). */
const MODEL = process.env.WNW_E2E_MODEL ?? '';
/** The page's query naming that model (empty: the shipped one). */
export const modelQuery = MODEL ? `model=${encodeURIComponent(MODEL)}` : '';
const modelReady = MODEL !== '' || existsSync(join('public', 'models', 'wnw-ref', 'config.json'));
/** Skips a test that loads the model when there is none. */
export const needsModel = () =>
  test.skip(!modelReady, 'no reference model in public/models/wnw-ref (npm run train makes one)');

/** The file a link downloads: its suggested name and its text. */
export async function download(page: Page, selector: string): Promise<{ name: string; text: string }> {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  return { name: d.suggestedFilename(), text: readFileSync(await d.path(), 'utf8') };
}

/** Each cue's [start, end] in seconds of an SRT (`sep` ",") or WebVTT (".") file. */
export function cueTimes(text: string, sep: ',' | '.'): [number, number][] {
  const t = `(\\d\\d):(\\d\\d):(\\d\\d)\\${sep}(\\d\\d\\d)`;
  return [...text.matchAll(new RegExp(`${t} --> ${t}`, 'g'))].map((m) => [
    +m[1] * 3600 + +m[2] * 60 + +m[3] + +m[4] / 1000,
    +m[5] * 3600 + +m[6] * 60 + +m[7] + +m[8] / 1000,
  ]);
}

/** Tokens a finished pane reports (its readout's data-tokens). */
export async function paneTokens(page: Page, pane: string): Promise<number> {
  return Number(await page.locator(`[data-pane="${pane}"] [data-tokens]`).getAttribute('data-tokens'));
}

export async function samples(page: Page): Promise<SampleEntry[]> {
  const res = await page.request.get('/samples.json');
  expect(res.ok()).toBe(true);
  return (await res.json()) as SampleEntry[];
}

/** The held-out espeak-ng clip closest to 60 s (the test sets are regenerated; names may change). */
export async function sixtySecondClip(page: Page): Promise<SampleEntry> {
  const held = (await samples(page)).filter((s) => s.group === 'espeak-heldout' && s.reference && s.seconds);
  expect(held.length, 'no espeak-heldout clips with references under public/test-sets').toBeGreaterThan(0);
  return held.sort((a, b) => Math.abs(a.seconds! - 60) - Math.abs(b.seconds! - 60))[0];
}

export async function shortestClip(page: Page): Promise<SampleEntry> {
  const clips = (await samples(page)).filter((s) => s.seconds && s.reference).sort((a, b) => a.seconds! - b.seconds!);
  expect(clips.length, 'no sample clips with references').toBeGreaterThan(0);
  return clips[0];
}

export async function chooseSample(page: Page, url: string): Promise<void> {
  await page.selectOption('#sample-select', url);
  await page.click('#sample-use');
  await expect(page.locator('#start')).toBeEnabled({ timeout: 60_000 });
}

/**
 * Ink over the tide chart's plot: the share of sampled pixels that differ from the empty
 * background, and the share the drawn rows should cover (rows scroll up from the bottom).
 */
export async function tideInk(page: Page): Promise<{ rows: number; ink: number; expected: number; colours: number }> {
  return page.evaluate(() => {
    const c = document.getElementById('tide') as HTMLCanvasElement;
    const plot = Number(c.dataset.plotHeight);
    const rowH = Number(c.dataset.rowHeight);
    const rows = Number(c.dataset.rows ?? 0);
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, plot).data;
    let ink = 0;
    const colours = new Set<number>();
    for (let i = 0; i < d.length; i += 4 * 7) {
      if (Math.abs(d[i] - 15) + Math.abs(d[i + 1] - 23) + Math.abs(d[i + 2] - 42) > 24) ink++;
      colours.add((d[i] >> 4) * 256 + (d[i + 1] >> 4) * 16 + (d[i + 2] >> 4));
    }
    return { rows, ink: ink / (d.length / 28), expected: Math.min(1, (rows * rowH) / plot), colours: colours.size };
  });
}

/** The first seconds of sample 1 through the page, full cache on the CPU backend, to a finished transcript. */
export async function transcribeHead(page: Page, seconds: number): Promise<void> {
  await page.setInputFiles('#file-input', {
    name: 'sample1-head.wav',
    mimeType: 'audio/wav',
    buffer: wavHead('samples/sample1.wav', seconds),
  });
  await expect(page.locator('#start')).toBeEnabled({ timeout: 60_000 });
  await page.selectOption('#policy', 'full');
  await page.selectOption('#backend', 'cpu');
  await page.click('#start');
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', /done|partial|failed/, {
    timeout: 240_000,
  });
  await expect(page.locator('#notice')).toBeHidden();
  await expect(page.locator('[data-pane="main"]')).toHaveAttribute('data-done', 'done');
}

/** The first `seconds` of a PCM WAV from public/, as a WAV of its own (header rebuilt around the cut). */
export function wavHead(file: string, seconds: number): Buffer {
  const wav = readFileSync(join('public', file));
  let pos = 12;
  let fmt: Buffer | null = null;
  while (pos + 8 <= wav.length) {
    const id = wav.toString('ascii', pos, pos + 4);
    const size = wav.readUInt32LE(pos + 4);
    if (id === 'fmt ') fmt = wav.subarray(pos + 8, pos + 8 + size);
    if (id === 'data' && fmt) {
      const bytesPerSecond = fmt.readUInt32LE(8);
      const blockAlign = fmt.readUInt16LE(12);
      const n = Math.min(size, Math.floor((seconds * bytesPerSecond) / blockAlign) * blockAlign);
      const head = Buffer.alloc(20);
      head.write('RIFF', 0, 'ascii');
      head.writeUInt32LE(4 + 8 + fmt.length + 8 + n, 4);
      head.write('WAVEfmt ', 8, 'ascii');
      head.writeUInt32LE(fmt.length, 16);
      const dataHead = Buffer.alloc(8);
      dataHead.write('data', 0, 'ascii');
      dataHead.writeUInt32LE(n, 4);
      return Buffer.concat([head, fmt, dataHead, wav.subarray(pos + 8, pos + 8 + n)]);
    }
    pos += 8 + size + (size & 1);
  }
  throw new Error(`${file}: no fmt/data chunks`);
}
