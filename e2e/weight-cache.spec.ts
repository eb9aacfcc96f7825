/**
 * The browser cache of packed weights, in headless Chromium: a miniature loaded by URL in
 * q4 twice (packed at load, or converted beforehand by `npx wnw convert`); the second load
 * reads no shard bytes (no Range request) and gives the very same packed weights;
 * `cache: false` and `clearWeightCache()` read the shards again (e2e/harness/weight-cache.ts).
 */
// This spec converts and reads model folders on disk in Node, as a script that imports wnw/node does.
import '../src/platform/node-host.js';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, expect } from '@playwright/test';
import { ensureMiniatures } from '../test/helpers/miniatures.js';
import { convertFolder } from '../src/cli/convert.js';

/** The Voxtral miniature as `npx wnw convert --quant q4` writes it, kept beside the miniatures. */
async function convertedVoxtral(dir: string): Promise<string> {
  const out = join(dir, 'converted', 'voxtral-q4');
  if (existsSync(join(out, 'wnw-weights.json'))) return out;
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  await convertFolder({ from: join(dir, 'voxtral'), to: tmp, format: 'q4' });
  if (!existsSync(join(out, 'wnw-weights.json'))) renameSync(tmp, out);
  else rmSync(tmp, { recursive: true, force: true });
  return out;
}

interface Load {
  ranges: number;
  bytes?: number;
  fromCache: boolean;
  same?: boolean;
  progress?: { loaded: number; total: number } | null;
}
interface Result {
  opfs: boolean;
  first: Load;
  second: Load;
  uncached?: Load;
  afterClear?: Load;
}

// Voxtral (untied head) also checks `cache: false` and clearing; Omni: a tied head and q/k/v
// biases; a folder converted by `npx wnw convert` is cached like one packed at load.
for (const [family, format, options] of [
  ['voxtral', 'q4', true],
  ['qwen2_5_omni', 'q4', false],
  ['converted/voxtral-q4', 'q4', false],
] as const) {
  test(`weight cache: ${family} ${format} by URL, second load from OPFS${options ? '; cache: false, clearWeightCache' : ''}`, async ({
    page,
  }) => {
    test.setTimeout(300_000);
    const dir = await ensureMiniatures();
    if (family.startsWith('converted/')) await convertedVoxtral(dir);
    const root =
      '/' +
      relative(fileURLToPath(new URL('..', import.meta.url)), dir)
        .split('\\')
        .join('/');
    page.on('console', (m) => {
      if (m.type() === 'error') console.log('[page]', m.text());
    });
    // Vite may reload the page once when the first load discovers a dependency to pre-bundle;
    // the run is idempotent (it starts by clearing the cache), so it is run again then.
    let r: Result | null = null;
    for (let attempt = 0; !r; attempt++) {
      await page.goto('/e2e/harness/weight-cache.html');
      await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
        timeout: 120_000,
      });
      try {
        r = await page.evaluate(
          ([u, f, o]) =>
            (
              window as unknown as { wnwWeightCache: { run(u: string, f: string, o: boolean): Promise<Result> } }
            ).wnwWeightCache.run(u, f, o),
          [`${root}/${family}`, format, options] as const,
        );
      } catch (e) {
        if (attempt > 0 || !/context was destroyed/.test(String(e))) throw e;
      }
    }
    console.log(`${family} ${format}: ${JSON.stringify(r)}`);
    expect(r.opfs).toBe(true);
    expect(r.first.ranges).toBeGreaterThan(0);
    expect(r.first.fromCache).toBe(false);
    // Download progress in bytes: the decoder's tensors, all of them read by the end (fewer than the Range bytes, which include headers and probes).
    expect(r.first.progress?.total).toBeGreaterThan(0);
    expect(r.first.progress?.loaded).toBe(r.first.progress?.total);
    expect(r.first.progress!.total).toBeLessThanOrEqual(r.first.bytes!);
    expect(r.second).toEqual({ ranges: 0, bytes: 0, fromCache: true, same: true });
    if (!options) return;
    expect(r.uncached?.ranges).toBeGreaterThan(0);
    expect(r.uncached?.fromCache).toBe(false);
    expect(r.uncached?.same).toBe(true);
    expect(r.afterClear?.ranges).toBeGreaterThan(0);
    expect(r.afterClear?.fromCache).toBe(false);
  });
}

// A converted folder is copied into the cache piece by piece; one packed at load is packed in memory, stored, then let go.
for (const family of ['converted/voxtral-q4', 'voxtral'] as const) {
  test(`weight cache, streamed (the WebGPU path): ${family} q4 fills it, the load and the next stream from it`, async ({
    page,
  }) => {
    test.setTimeout(300_000);
    const dir = await ensureMiniatures();
    if (family.startsWith('converted/')) await convertedVoxtral(dir);
    const root =
      '/' +
      relative(fileURLToPath(new URL('..', import.meta.url)), dir)
        .split('\\')
        .join('/');
    page.on('console', (m) => {
      if (m.type() === 'error') console.log('[page]', m.text());
    });
    type Streamed = {
      first: {
        ranges: number;
        fromCache: boolean;
        packed: boolean;
        where: string | null;
        progress: { loaded: number; total: number } | null;
      };
      second: {
        ranges: number;
        bytes: number;
        fromCache: boolean;
        packed: boolean;
        where: string | null;
        same: boolean;
      };
    };
    let r: Streamed | null = null;
    for (let attempt = 0; !r; attempt++) {
      await page.goto('/e2e/harness/weight-cache.html');
      await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
        timeout: 120_000,
      });
      try {
        r = await page.evaluate(
          (u) =>
            (
              window as unknown as { wnwWeightCache: { runStreamed(u: string, f: string): Promise<Streamed> } }
            ).wnwWeightCache.runStreamed(u, 'q4'),
          `${root}/${family}`,
        );
      } catch (e) {
        if (attempt > 0 || !/context was destroyed/.test(String(e))) throw e;
      }
    }
    console.log(`streamed ${family}: ${JSON.stringify(r)}`);
    // The first load read the shards' decoder tensors into the cache (download progress to the end) and streams from there.
    expect(r.first.ranges).toBeGreaterThan(0);
    expect(r.first.fromCache).toBe(false);
    expect(r.first.packed).toBe(false);
    expect(r.first.where).toBe('the browser cache');
    expect(r.first.progress?.total).toBeGreaterThan(0);
    expect(r.first.progress?.loaded).toBe(r.first.progress?.total);
    expect(r.second).toEqual({
      ranges: 0,
      bytes: 0,
      fromCache: true,
      packed: false,
      where: 'the browser cache',
      same: true,
    });
  });
}
