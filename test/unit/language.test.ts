/**
 * The language option from transcribe() to the prompt: a call's "none" replaces the
 * load-time language with the family's prompt without one; a nonsense value is refused
 * before any audio is read.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WnwError } from '../../src/errors.js';
import { loadTextTokenizer, type TextTokenizer } from '../../src/model/text/index.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import type { DecoderBackend } from '../../src/backend/types.js';
import { ensureMiniatures } from '../helpers/miniatures.js';

describe('the language option in a transcription', () => {
  let t: WnwTranscriber;
  let tok: TextTokenizer;
  beforeAll(async () => {
    const dir = join(await ensureMiniatures(), 'qwen2_audio');
    t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full', language: 'EN' });
    tok = await loadTextTokenizer(dir);
  }, 120_000);
  afterAll(() => t?.dispose());

  it('a call\'s "none" gives the prompt without a language; omitted, the load-time one holds', async () => {
    const c = t.model.config;
    const decoder = (t as unknown as { decoder: DecoderBackend }).decoder;
    const open = decoder.open.bind(decoder);
    const openByLayer = decoder.openByLayer.bind(decoder);
    const seen: string[] = [];
    decoder.open = (o) => {
      seen.push(tok.decode((o.prompt ?? c).instruction));
      return open(o);
    };
    decoder.openByLayer = (o) => {
      seen.push(tok.decode((o.prompt ?? c).instruction));
      return openByLayer(o);
    };
    const audioLength = 25;
    const enc = {
      embeddings: new Float32Array(audioLength * c.hiddenSize),
      audioLength,
      audioSeconds: 1,
      encodeMs: 0,
      encoderBytes: 0,
    };
    for (const language of [undefined, 'none', 'de'])
      await t.decodeEncoded(enc, { maxNewTokens: 1, ...(language ? { language } : {}) });
    // A translation from the load-time language, then the transcription again.
    await t.decodeEncoded(enc, { maxNewTokens: 1, task: 'translate', targetLanguage: 'fr' });
    await t.decodeEncoded(enc, { maxNewTokens: 1 });
    expect(seen[0]).toContain('Detect the language and recognize the speech: <|en|>');
    expect(seen[1]).toContain('Detect the language and recognize the speech:\n');
    expect(seen[1]).not.toMatch(/<\|\w+\|>\n|none/);
    expect(seen[2]).toContain('recognize the speech: <|de|>');
    expect(seen[3]).toContain('Detect the language and translate the speech into French: <|en|>');
    expect(seen[4]).toBe(seen[0]);
  }, 60_000);

  it('a value that is neither a code nor "none" is a BAD_ARGUMENT before the audio is read', async () => {
    const err = await t.transcribe(new Float32Array(16000), { language: 'English' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WnwError);
    expect((err as WnwError).code).toBe('BAD_ARGUMENT');
    expect((err as Error).message).toContain('"none" for no language');
  });
});
