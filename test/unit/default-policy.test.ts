/**
 * A first run on a folder without its head triage (a fresh download has no heads.json) does
 * not stop at the missing file: without a policy asked for, the full cache runs and one line
 * says why; a policy that needs the file, asked for by name, is still the clear error.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadTranscriber } from '../../src/transcribe/transcriber.js';
import { defaultModelDir, parseTranscribeArgs } from '../../src/cli/args.js';
import { WnwError } from '../../src/errors.js';
import type { ProgressEvent } from '../../src/types.js';
import { linkedCopy } from '../helpers/miniatures.js';
import { runCliCaptured } from '../helpers/cli.js';
import { tempDir } from '../helpers/temp.js';

const clip = join(defaultModelDir(), 'fixtures', 'clip1.wav');

describe('a model folder without heads.json', () => {
  let bare: string;
  beforeAll(() => {
    bare = linkedCopy(defaultModelDir(), join(tempDir('wnw-no-heads-'), 'model'));
  });

  it('loads with the full cache when no policy is asked for, saying so; wnw asked for by name is BAD_ARGUMENT', async () => {
    const said: ProgressEvent[] = [];
    const asr = await loadTranscriber({ model: bare, backend: 'cpu', onProgress: (e) => void said.push(e) });
    try {
      expect(asr.modelInfo.heads).toBe(false);
      const r = await asr.transcribe(new Uint8Array(readFileSync(clip)));
      expect(r.stats.policy).toBe('full');
      expect(said.some((e) => /no heads\.json .*full cache/.test(e.detail ?? ''))).toBe(true);
    } finally {
      asr.dispose();
    }
    const err = await loadTranscriber({ model: bare, backend: 'cpu', policy: 'wnw' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect((err as WnwError).code).toBe('BAD_ARGUMENT');
    expect((err as Error).message).toMatch(/needs the calibrated heads\.json/);
  }, 120_000);

  it('the CLI defaults to the full cache there, in one line on stderr, and to WnW where heads.json is', async () => {
    expect(parseTranscribeArgs([clip, '--model', bare]).policy).toBe('full');
    expect(parseTranscribeArgs([clip]).policy).toBe('wnw');
    expect(parseTranscribeArgs([clip, '--model', bare, '--policy', 'snapkv']).policy).toBe('snapkv');
    const r = await runCliCaptured(['transcribe', clip, '--model', bare, '--backend', 'cpu']);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/has no heads\.json, so this runs the full cache/);
    expect(r.err).toMatch(/policy full/);
    expect(r.out.trim().length).toBeGreaterThan(0);
    const asked = await runCliCaptured(['transcribe', clip, '--model', bare, '--backend', 'cpu', '--policy', 'wnw']);
    expect(asked.code).not.toBe(0);
    expect(asked.err).toMatch(/needs the calibrated heads\.json/);
  }, 180_000);
});
