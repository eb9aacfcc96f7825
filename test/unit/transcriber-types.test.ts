/**
 * The page's one `Transcriber`: both loaders return it, so a page moves its work into a
 * worker by changing the call that loads it. The type checks run where `npm test` runs tsc;
 * each `@ts-expect-error` fails that check if a research member shows on the interface.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { loadTranscriber, loadTranscriberInWorker, type LoadOptions, type Transcriber } from '../../src/index.js';
import { loadWnwTranscriber, WnwTranscriber } from '../../src/research.js';

/** A page's code after the load: the same whichever loader made `asr`. */
async function pageAfterLoad(asr: Transcriber, audio: Blob): Promise<string> {
  const r = await asr.transcribe(audio, { onToken: () => {} });
  const rec = await asr.open(audio);
  await rec.subtitles('vtt');
  const live = asr.live({ onText: () => {} });
  await live.append(new Float32Array(16000));
  const done = await live.stop();
  await asr[Symbol.asyncDispose]();
  return `${asr.backend} ${asr.backendReason ?? ''} ${asr.modelInfo.name} ${r.text} ${done.text}`;
}

// @ts-expect-error encode belongs to WnwTranscriber (wnw/research), not to a page's transcriber
export const encode = (asr: Transcriber) => asr.encode;
// @ts-expect-error decodeEncoded belongs to WnwTranscriber (wnw/research)
export const decodeEncoded = (asr: Transcriber) => asr.decodeEncoded;
// @ts-expect-error the live host belongs to WnwTranscriber (wnw/research)
export const liveHost = (asr: Transcriber) => asr.liveHost;
// @ts-expect-error the loaded model's weights and tokenizer are research's; a page reads modelInfo
export const model = (asr: Transcriber) => asr.model;

describe('one Transcriber for both loaders', () => {
  it('loadTranscriber and loadTranscriberInWorker both give a Transcriber; the class is in wnw/research', () => {
    expectTypeOf(loadTranscriber).returns.resolves.toEqualTypeOf<Transcriber>();
    expectTypeOf(loadTranscriberInWorker).parameter(0).toEqualTypeOf<LoadOptions>();
    expectTypeOf(loadTranscriberInWorker).returns.resolves.toEqualTypeOf<Transcriber>();
    expectTypeOf(loadWnwTranscriber).returns.resolves.toEqualTypeOf<WnwTranscriber>();
    expectTypeOf<WnwTranscriber>().toMatchTypeOf<Transcriber>();
    // Switching a page is one call: the same code takes either loader.
    const pages = [loadTranscriber, loadTranscriberInWorker].map(
      (load) => (o: LoadOptions, audio: Blob) => load(o).then((asr) => pageAfterLoad(asr, audio)),
    );
    expect(pages).toHaveLength(2);
  });
});
