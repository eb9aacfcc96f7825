/**
 * The page side of "calibrate for WnW" (src/calibrate/browser.ts), in Node: the site's
 * calibration set yields the clips `wnw calibrate --limit N` takes from the same folder, and
 * the user's own files pair NAME.wav with NAME.json, with typed errors for what cannot be a
 * clip. The run itself (the worker, OPFS) is e2e/calibrate.spec.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { clipsFromFiles, siteClips } from '../../src/calibrate/browser.js';
import { listCalibrationClips } from '../../src/calibrate/clips.js';

const SET = 'calibration-data';

describe("the site's calibration set", () => {
  afterEach(() => vi.unstubAllGlobals());

  it('gives the first N clips by name, as the CLI takes them from the folder, with their transcripts, audio addresses and seconds', async () => {
    const base = new URL('https://site.example/app/calibration-data/');
    const asked: string[] = [];
    // The site serves the repository's calibration-data/ (the dev server from the repository, the build a copy).
    vi.stubGlobal('fetch', async (u: URL | string) => {
      const url = new URL(String(u));
      asked.push(url.pathname);
      const name = url.pathname.slice(base.pathname.length);
      try {
        return new Response(await readFile(join(SET, name)), { status: 200 });
      } catch {
        return new Response('not found', { status: 404 });
      }
    });
    const clips = await siteClips(base, 3);
    const cli = await listCalibrationClips(SET, 3);
    expect(clips.map((c) => c.id)).toEqual(cli.map((c) => c.id));
    expect(clips.map((c) => c.text)).toEqual(cli.map((c) => c.text));
    expect(clips.map((c) => c.words)).toEqual(cli.map((c) => c.words));
    expect(clips.map((c) => c.audio)).toEqual(cli.map((c) => new URL(`${c.id}.wav`, base).href));
    expect(clips.every((c) => typeof c.seconds === 'number' && c.seconds > 5)).toBe(true);
    // The audio is left to the worker: only the manifest and the transcripts were fetched here.
    expect(asked.every((p) => p.endsWith('.json'))).toBe(true);
  });

  it('a site without the set says so, typed', async () => {
    vi.stubGlobal('fetch', async () => new Response('', { status: 404 }));
    await expect(siteClips(new URL('https://site.example/calibration-data/'), 2)).rejects.toMatchObject({
      code: 'BAD_ARGUMENT',
      message: expect.stringMatching(/calibration set is not there/),
    });
  });
});

describe("the user's own clips", () => {
  const json = (name: string, v: unknown) => new File([JSON.stringify(v)], name, { type: 'application/json' });
  const wav = (name: string) => new File([new Uint8Array(44)], name, { type: 'audio/wav' });
  const clip = {
    text: 'ab cd',
    words: [
      { word: 'ab', start: 0, end: 0.4 },
      { word: 'cd', start: 0.4, end: 0.8 },
    ],
  };

  it('pairs NAME.wav with NAME.json, in name order, and leaves out what has no pair', async () => {
    const clips = await clipsFromFiles([
      wav('b.wav'),
      json('b.json', clip),
      json('a.json', clip),
      wav('a.WAV'),
      json('lonely.json', clip),
      wav('alone.wav'),
    ]);
    expect(clips.map((c) => c.id)).toEqual(['a', 'b']);
    expect(clips[0].audio).toBeInstanceOf(File);
    expect((clips[0].audio as File).name).toBe('a.WAV');
    expect(clips[1].words).toEqual(clip.words);
  });

  it('refuses, typed, files that hold no clip', async () => {
    await expect(clipsFromFiles([wav('x.wav')])).rejects.toMatchObject({
      code: 'BAD_ARGUMENT',
      message: expect.stringMatching(/NAME\.wav/),
    });
    await expect(clipsFromFiles([wav('x.wav'), new File(['{ nope'], 'x.json')])).rejects.toMatchObject({
      code: 'BAD_ARGUMENT',
      message: expect.stringMatching(/x\.json is not JSON/),
    });
    await expect(clipsFromFiles([wav('x.wav'), json('x.json', { text: 'no words' })])).rejects.toMatchObject({
      code: 'BAD_ARGUMENT',
      message: expect.stringMatching(/"words"/),
    });
  });
});
