import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { TekkenTokenizer } from '../../src/model/text/tekken.js';
import { MISTRAL_PATTERN } from '../../src/model/text/patterns.js';
import { ModelLoadError } from '../../src/errors.js';
import { readJsonFile, referenceIds, tokenizerDir } from './tokenizer-fixtures.js';

const b64 = (bytes: number[]) => btoa(String.fromCharCode(...bytes));
const ascii = (s: string) => Array.from(s, (c) => c.charCodeAt(0));

/** A hand-sized tekken.json: the 256 bytes, four merges, one rank past the cut, 4 specials of which 3 are listed. */
function tinyTekken(extra: Record<string, unknown> = {}) {
  const merged = ['he', ' t', ' the', 'th', ' thee'];
  const vocab = [
    ...Array.from({ length: 256 }, (_, b) => ({ rank: b, token_bytes: b64([b]), token_str: null })),
    ...merged.map((s, i) => ({ rank: 256 + i, token_bytes: b64(ascii(s)), token_str: s })),
  ];
  return {
    config: {
      pattern: MISTRAL_PATTERN,
      num_vocab_tokens: vocab.length,
      default_vocab_size: 4 + 260,
      default_num_special_tokens: 4,
      version: 'v7',
    },
    vocab,
    special_tokens: ['<unk>', '<s>', '</s>'].map((token_str, rank) => ({ rank, token_str, is_control: true })),
    ...extra,
  };
}

describe('TekkenTokenizer on a hand-sized file', () => {
  const tok = TekkenTokenizer.fromJSON(tinyTekken());

  it('merges the lowest-rank pair first, offsets ids by the special count, and ignores ranks past the cut', () => {
    // " thee": he(256) -> " t"+"he" = " the"(258) -> no rank joins " the"+"e" below the cut
    // (" thee" is rank 260, past default_vocab_size - 4 = 260 ranks), so [" the", "e"].
    expect(tok.encode(' thee')).toEqual([258 + 4, 'e'.charCodeAt(0) + 4]);
    // "the": th(259) and he(256) compete; he wins, then "t"+"he" is not a rank.
    expect(tok.encode('the')).toEqual(['t'.charCodeAt(0) + 4, 256 + 4]);
    // A whole piece that is a rank is taken as is.
    expect(tok.encode('he the')).toEqual([256 + 4, 258 + 4]);
    expect(tok.encode('he', { bos: true, eos: true })).toEqual([1, 260, 2]);
  });

  it('fills unlisted special ranks with <SPECIAL_n>', () => {
    expect(tok.numSpecial).toBe(4);
    expect(tok.vocabSize).toBe(264);
    expect(tok.tokenId('<SPECIAL_3>')).toBe(3);
    expect(tok.specialString(3)).toBe('<SPECIAL_3>');
    expect([tok.bos, tok.eos]).toEqual([1, 2]);
  });

  it('rejects files that break the format, naming the file', () => {
    const short = tinyTekken();
    short.config.default_vocab_size = 4 + 262;
    expect(() => TekkenTokenizer.fromJSON(short, 'x/tekken.json')).toThrow(
      /x\/tekken.json.*fewer than default_vocab_size/,
    );
    const swapped = tinyTekken();
    swapped.vocab[7] = { rank: 7, token_bytes: b64([8]), token_str: null };
    expect(() => TekkenTokenizer.fromJSON(swapped)).toThrow(ModelLoadError);
    expect(() => TekkenTokenizer.fromJSON({ vocab: [] })).toThrow(/missing "config"/);
    const dup = tinyTekken({
      special_tokens: [
        { rank: 0, token_str: '<s>' },
        { rank: 1, token_str: '<s>' },
      ],
    });
    expect(() => TekkenTokenizer.fromJSON(dup)).toThrow(/unique/);
  });
});

describe('TekkenTokenizer on the Voxtral miniature tekken.json', () => {
  const file = join(tokenizerDir(), 'voxtral', 'tekken.json');
  const json = readJsonFile(file) as { vocab: { rank: number; token_str: string | null }[] };
  const tok = TekkenTokenizer.fromJSON(json, file);
  const rankOf = (s: string) => json.vocab.find((v) => v.token_str === s)!.rank;

  it('has the real layout: 131072 ids, 1000 specials, the Voxtral control tokens at their ranks', () => {
    expect(tok.vocabSize).toBe(131072);
    expect(tok.numSpecial).toBe(1000);
    const ids = Object.fromEntries(
      ['<unk>', '<s>', '</s>', '[INST]', '[/INST]', '<pad>', '[AUDIO]', '[BEGIN_AUDIO]', '[TRANSCRIBE]'].map((s) => [
        s,
        tok.tokenId(s),
      ]),
    );
    expect(ids).toEqual({
      '<unk>': 0,
      '<s>': 1,
      '</s>': 2,
      '[INST]': 3,
      '[/INST]': 4,
      '<pad>': 11,
      '[AUDIO]': 24,
      '[BEGIN_AUDIO]': 25,
      '[TRANSCRIBE]': 34,
    });
    expect(tok.tokenId('<SPECIAL_999>')).toBe(999);
    expect(tok.isControl(999)).toBe(true);
    expect(tok.isControl(1000)).toBe(false);
  });

  it('splits "lang:en" as the Tekken pattern does and maps pieces to rank + 1000', () => {
    // Pieces "lang" and ":en"; neither is a rank. In "lang" the pairs la/an/ng: "la" is no rank
    // and "an" ranks below "ng", so l|an|g, and neither "lan" nor "ang" is a rank; ":e" is no
    // rank, "en" is: :|en.
    const used = json.vocab.slice(0, 130072);
    for (const s of ['la', 'lan', 'ang', ':e', 'lang', ':en'])
      expect(
        used.some((v) => v.token_str === s),
        s,
      ).toBe(false);
    expect(rankOf('an')).toBeLessThan(rankOf('ng'));
    expect(tok.encode('lang:en')).toEqual(['l', 'an', 'g', ':', 'en'].map((s) => rankOf(s) + 1000));
  });

  it('matches an independent Python implementation of mistral-common encoding', () => {
    const texts = [
      'Hello world, the café is naïve.',
      "Don't worry, it's €3.50 at 10:45!\n\nNew line  here  ",
      'HELLOWorld camelCaseWords and ÉCOLE élève',
      'tab\tand\r\nCRLF, a/b/c //x\n/y 12345 ٣٤',
      'naïve (combining: nai\u0308ve), 漢字かな, emoji 🙂👍🏽',
      'next\u0085line no\u00a0break bom\ufeffhere',
      'The speaker pauses; the transcript waits. Speech, text, tokens, heads, layers.',
    ];
    const expected = referenceIds('encode-tekken', file, texts);
    texts.forEach((t, i) => expect(tok.encode(t), JSON.stringify(t)).toEqual(expected[i]));
  });

  it('round-trips text, skips special tokens, and streams multi-byte characters split across tokens', () => {
    for (const s of ['Hello world, the café is naïve.', '€3.50 — 漢字 🙂 done\n'])
      expect(tok.decode(tok.encode(s))).toBe(s);
    const ids = [1, 3, ...tok.encode('the café'), 4, 2];
    expect(tok.decode(ids)).toBe('the café');
    // "€" = E2 82 AC as three byte tokens (ranks 0..255 are the bytes).
    const d = tok.decoder();
    const parts = [0xe2, 0x82, 0xac, 0x21].map((b) => d.push(b + 1000));
    expect(parts).toEqual(['', '', '€', '!']);
    expect(d.flush()).toBe('');
    const d2 = tok.decoder();
    const ok = tok
      .encode('ok')
      .map((id) => d2.push(id))
      .join('');
    expect(ok + d2.push(0xc3 + 1000) + d2.push(2) + d2.flush()).toBe('ok\ufffd');
    expect(tok.decode([131071, 999999, -5])).toBe(tok.pieceText(131071));
  });
});
