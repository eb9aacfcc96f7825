/**
 * `wnw calibrate` on each Hugging Face miniature (random weights) writes a heads.json that
 * `wnw transcribe --policy wnw` then decodes with: one short spoken clip, the default triage
 * (the answer path), both commands through the CLI in-process on the CPU. The transcript is nonsense; what
 * is checked is that the file loads and WnW runs on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toMono16k } from '../../src/audio/decode.js';
import { loadModel } from '../../src/model/loader.js';
import { parseHeadsFile } from '../../src/policy/wnw/triage.js';
import { ensureMiniatures, linkedCopy, MINIATURE_FAMILIES } from '../helpers/miniatures.js';
import { runCliCaptured } from '../helpers/cli.js';
import { expectWnwDecoded } from '../helpers/expect-wnw.js';

const SR = 16000;
const TEXT = 'the quick brown fox';

describe('wnw calibrate on the miniatures, then wnw transcribe --policy wnw with its heads.json', () => {
  let models = '';
  let tmp = '';
  let clips = '';
  let wav = '';

  beforeAll(async () => {
    models = await ensureMiniatures();
    tmp = mkdtempSync(join(tmpdir(), 'wnw-calibrate-miniatures-'));
    clips = join(tmp, 'clips');
    mkdirSync(clips);
    wav = join(clips, 'fox.wav');
    execFileSync('espeak-ng', ['-w', wav, TEXT], { stdio: 'ignore' });
    // Word times spread evenly over the clip: the Voice Score needs spans, not good ones.
    const seconds = (await toMono16k(new Uint8Array(readFileSync(wav)), SR)).length / SR;
    const words = TEXT.split(' ');
    const w = seconds / words.length;
    writeFileSync(
      join(clips, 'fox.json'),
      JSON.stringify({
        text: TEXT,
        words: words.map((word, i) => ({ word, start: i * w, end: (i + 1) * w, confidence: 1 })),
      }),
    );
  }, 120_000);
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  for (const family of MINIATURE_FAMILIES) {
    it(`${family}: the calibrated heads.json is the one WnW transcribes with`, async () => {
      // A copy of the miniature (links to its files), so the shared cache gets no heads.json.
      const dir = linkedCopy(join(models, family), join(tmp, family));

      const cal = await runCliCaptured([
        'calibrate',
        '--model',
        dir,
        '--clips',
        clips,
        '--backend',
        'cpu',
        '--language',
        'en',
      ]);
      expect(cal.code, cal.err).toBe(0);
      expect(cal.err).toContain(`calibrate: wrote ${join(dir, 'heads.json')}`);
      expect(existsSync(`${join(dir, 'heads.json')}.partial.json`)).toBe(false);
      const model = await loadModel(dir);
      const { numLayers, numKvHeads } = model.config;
      const heads = parseHeadsFile(JSON.parse(readFileSync(join(dir, 'heads.json'), 'utf8')), numLayers, numKvHeads);
      expect(heads.sensitivityEstimator).toBe('answer-path');
      expect(heads.headSensitivity.every((x) => Number.isFinite(x) && x >= 0)).toBe(true);
      expect(heads.headSensitivity.some((x) => x > 0)).toBe(true);
      // What the loader hands WnW is this file.
      expect(model.heads?.sensitivityEstimator).toBe('answer-path');
      expect(model.heads?.headSensitivity).toEqual(heads.headSensitivity);

      const tr = await runCliCaptured([
        'transcribe',
        wav,
        '--model',
        dir,
        '--backend',
        'cpu',
        '--policy',
        'wnw',
        '--language',
        'en',
        '--json',
      ]);
      expect(tr.code, tr.err).toBe(0);
      // --json prints its stats flat (cli/main.ts jsonOutput), the result groups them.
      const out = JSON.parse(tr.out);
      expectWnwDecoded({ ...out, stats: { ...out.stats, kv: { rGpu: out.stats.rGpu } } });
    }, 60_000);
  }
});
