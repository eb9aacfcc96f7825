/**
 * The decoder of a converted folder streamed into the GPU by `loadTranscriber` (no page
 * copy): it transcribes, and after a device loss the next run streams it again from the
 * shards and gives the same tokens (e2e/harness/stream-upload.ts).
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
async function convertedVoxtral(dir: string): Promise<void> {
  const out = join(dir, 'converted', 'voxtral-q4');
  if (existsSync(join(out, 'wnw-weights.json'))) return;
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  await convertFolder({ from: join(dir, 'voxtral'), to: tmp, format: 'q4' });
  if (!existsSync(join(out, 'wnw-weights.json'))) renameSync(tmp, out);
  else rmSync(tmp, { recursive: true, force: true });
}

interface Result {
  backend: string;
  phases: string[];
  uploadEvents: number;
  uploadEnd: { loaded: number; total: number } | null;
  loadRanges: number;
  firstTokens: number[];
  firstError: string | null;
  lostError: string | null;
  rebuildRanges: number;
  againTokens: number[];
  againError: string | null;
}

test('streamed upload: a converted folder transcribes on WebGPU, and is streamed again after a device loss', async ({
  page,
}) => {
  test.setTimeout(300_000);
  const dir = await ensureMiniatures();
  await convertedVoxtral(dir);
  const root =
    '/' +
    relative(fileURLToPath(new URL('..', import.meta.url)), dir)
      .split('\\')
      .join('/');
  page.on('console', (m) => {
    if (m.type() === 'error') console.log('[page]', m.text());
  });
  let r: Result | null = null;
  for (let attempt = 0; !r; attempt++) {
    await page.goto('/e2e/harness/stream-upload.html');
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
      timeout: 120_000,
    });
    try {
      r = await page.evaluate(
        (u) => (window as unknown as { wnwStreamUpload: { run(u: string): Promise<Result> } }).wnwStreamUpload.run(u),
        `${root}/converted/voxtral-q4`,
      );
    } catch (e) {
      // Vite may reload the page once when the first load discovers a dependency to pre-bundle.
      if (attempt > 0 || !/context was destroyed/.test(String(e))) throw e;
    }
  }
  console.log(`stream upload: ${JSON.stringify(r)}`);
  expect(r.backend).toBe('webgpu');
  expect(r.phases).toEqual(expect.arrayContaining(['download', 'upload', 'compile']));
  // The upload reports the bytes as they stream, piece by piece, to the end.
  expect(r.uploadEnd!.loaded).toBe(r.uploadEnd!.total);
  expect(r.uploadEvents).toBeGreaterThan(2);
  expect(r.loadRanges).toBeGreaterThan(0);
  expect(r.firstError).toBeNull();
  expect(r.firstTokens.length).toBeGreaterThan(0);
  expect(r.lostError).toBe('DeviceLostError');
  // The rebuild read the decoder from the shards again and computes the same tokens.
  expect(r.rebuildRanges).toBeGreaterThan(0);
  expect(r.againError).toBeNull();
  expect(r.againTokens).toEqual(r.firstTokens);
});
