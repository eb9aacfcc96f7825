/**
 * A family's known answer wrappers come off the transcript: in the final text and in the
 * streamed pieces, which hold back what may still be a wrapper and release it once it
 * cannot be; the raw answer stays in rawText.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qwen2Audio } from '../../src/model/families/qwen2-audio.js';
import { loadTextTokenizer } from '../../src/model/text/index.js';
import { matchStart, ReplyUnwrapper, unwrapReply } from '../../src/transcribe/reply.js';
import { loadTranscriber, type WnwTranscriber } from '../../src/transcribe/transcriber.js';
import { ensureMiniatures } from '../helpers/miniatures.js';

const W = qwen2Audio.replyWrappers!;
const INNER = 'Mister Quiller is the apostle of the middle classes and we are glad to welcome his gospel.';

/** The text streamed for `raw` cut into pieces at `cuts`, and what each push released. */
function stream(raw: string, cuts: number[]): { joined: string; pieces: string[] } {
  const u = new ReplyUnwrapper(W);
  const pieces: string[] = [];
  let from = 0;
  for (const c of [...cuts, raw.length]) {
    pieces.push(u.push(raw.slice(from, c)));
    from = c;
  }
  pieces.push(u.flush());
  return { joined: pieces.join(''), pieces };
}

describe('answer wrappers', () => {
  it('a pattern matches case-insensitively, a space as any whitespace or none, and says when the text is too short to tell', () => {
    expect(matchStart("is: '", "IS:'x")).toBe(4);
    expect(matchStart("is: '", "is:  'x")).toBe(6);
    expect(matchStart("is: '", ' is')).toBe('partial');
    expect(matchStart("is: '", 'is: x')).toBeNull();
  });

  it("Qwen2-Audio's \"The original content of this audio is: '…'\" comes off, with or without the space and quotes", () => {
    expect(unwrapReply(W, `The original content of this audio is: '${INNER}'`)).toBe(INNER);
    expect(unwrapReply(W, `The original content of this audio is:'${INNER}'`)).toBe(INNER);
    expect(unwrapReply(W, `The original content of this audio is: "${INNER}"\n`)).toBe(INNER);
    expect(unwrapReply(W, `The original content of this audio is: ${INNER}`).trim()).toBe(INNER);
    // A transcript that only starts like the wrapper, or has apostrophes of its own, is kept whole.
    expect(unwrapReply(W, 'The original plan failed.')).toBe('The original plan failed.');
    expect(unwrapReply(W, "The original content of this audio is: 'don't stop'")).toBe("don't stop");
    expect(unwrapReply(W, "don't stop'")).toBe("don't stop'");
    expect(unwrapReply([], `The original content of this audio is: '${INNER}'`)).toBe(
      `The original content of this audio is: '${INNER}'`,
    );
  });

  it('streamed pieces join to the final text wherever the answer is cut, and never show part of the wrapper', () => {
    const raws = [
      `The original content of this audio is: '${INNER}'`,
      'The original plan failed.',
      'The',
      "it's 'quoted' '",
    ];
    for (const raw of raws) {
      const final = unwrapReply(W, raw);
      for (let a = 0; a <= raw.length; a++) {
        for (const b of [a, a + 1, a + 7]) {
          const { joined, pieces } = stream(raw, [a, Math.min(raw.length, b)]);
          expect(joined).toBe(final);
          if (raw.startsWith('The original content')) for (const p of pieces) expect(p).not.toMatch(/original|'$/);
        }
      }
      // One character at a time, as a byte-level tokenizer may release it.
      expect(
        stream(
          raw,
          Array.from({ length: raw.length }, (_, i) => i),
        ).joined,
      ).toBe(final);
    }
  });

  it('holds the opening back while it may still be a wrapper, then releases it', () => {
    const u = new ReplyUnwrapper(W);
    expect(u.push('The ')).toBe('');
    expect(u.push('original ')).toBe('');
    expect(u.push('plan')).toBe('The original plan');
    expect(u.push(' failed')).toBe(' failed');
  });
});

describe("Qwen2-Audio's wrapper through the decoder's text path", () => {
  let dir = '';
  let t: WnwTranscriber;
  beforeAll(async () => {
    dir = join(await ensureMiniatures(), 'qwen2_audio');
    t = await loadTranscriber({ model: dir, backend: 'cpu', policy: 'full' });
  }, 120_000);
  afterAll(() => t?.dispose());

  it('the ids of a wrapped reply decode to the inner transcript in r.text and the stream, the whole answer in r.rawText', async () => {
    const tok = await loadTextTokenizer(dir);
    const wrapped = `The original content of this audio is: '${INNER}'`;
    const ids = tok.encode(wrapped);
    expect(tok.decode(ids)).toBe(wrapped);
    const D = t.model.config.hiddenSize;
    const audioLength = 25;
    const enc = {
      embeddings: new Float32Array(audioLength * D).fill(0.01),
      audioLength,
      audioSeconds: 1,
      encodeMs: 0,
      encoderBytes: 0,
    };
    const streamed: string[] = [];
    const shown: string[] = [];
    const r = await t.decodeEncoded(enc, {
      probe: { forcedTokens: ids },
      onToken: (s) => void streamed.push(s),
      onStep: (s) => void shown.push(s.text),
    });
    expect(r.error).toBeUndefined();
    expect(r.tokens).toEqual(ids);
    expect(r.rawText).toBe(wrapped);
    expect(r.text).toBe(INNER);
    // The word timings are the inner transcript's words, the wrapper's gone.
    expect(r.words.map((w) => w.word).join(' ')).toBe(INNER);
    expect(streamed.join('')).toBe(INNER);
    for (const s of [...streamed, ...shown]) expect(s).not.toContain('original content');
  }, 60_000);
});
