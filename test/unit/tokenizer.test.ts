import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '../../src/model/tokenizer.js';
import { ModelLoadError } from '../../src/errors.js';
import { tempDir } from '../helpers/temp.js';

const W = '\u2581';
const BYTES = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
const PIECES = [
  '<pad>',
  '<s>',
  '</s>',
  '<unk>',
  '<|transcribe|>',
  `${W}the`,
  `${W}cat`,
  `${W}sat`,
  `${W}on`,
  `${W}`,
  't',
  'h',
  'e',
  'a',
  's',
  'c',
  'o',
  'n',
  `${W}th`,
  "'s",
  `${W}it`,
  '.',
  ...BYTES,
];
const JSON_TOK = { type: 'sentencepiece', model: 'unigram', pieces: PIECES, bos: 1, eos: 2, pad: 0, unk: 3 };

describe('Tokenizer', () => {
  const tok = Tokenizer.fromJSON(JSON_TOK);
  const id = (p: string) => PIECES.indexOf(p);

  it('decodes pieces with ▁ as word starts and skips control tokens', () => {
    const ids = [
      1,
      id(`${W}the`),
      id(`${W}cat`),
      4,
      id(`${W}sat`),
      id(`${W}on`),
      id(`${W}it`),
      id("'s"),
      id('.'),
      2,
      0,
    ];
    expect(tok.decode(ids)).toBe("the cat sat on it's.");
    expect(tok.decode([])).toBe('');
    expect(tok.decode([3, 99999, -1])).toBe('');
    expect(tok.isControl(4)).toBe(true);
    expect(tok.isControl(id(`${W}cat`))).toBe(false);
  });

  it('assembles UTF-8 from byte pieces', () => {
    // "é" = C3 A9, "€" = E2 82 AC
    const ids = [id(`${W}the`), id(`${W}`), 22 + 0xc3, 22 + 0xa9, 22 + 0xe2, 22 + 0x82, 22 + 0xac];
    expect(tok.decode(ids)).toBe('the é€');
  });

  it('streams: the pushes and the flush concatenate to decode(), holding back partial UTF-8', () => {
    const ids = [1, id(`${W}the`), id(`${W}`), 22 + 0xe2, 22 + 0x82, 22 + 0xac, id(`${W}cat`), 4, id('.'), 2];
    const d = tok.decoder();
    const parts = ids.map((i) => d.push(i));
    parts.push(d.flush());
    expect(parts.join('')).toBe(tok.decode(ids));
    expect(parts[1]).toBe('the'); // no leading space on the first word
    expect(parts[3]).toBe(''); // first byte of the euro sign: held back
    expect(parts[4]).toBe('');
    expect(parts[5]).toBe('€');
    // A truncated sequence at the end is flushed as U+FFFD rather than lost.
    const d2 = tok.decoder();
    expect(d2.push(id(`${W}cat`)) + d2.push(22 + 0xc3) + d2.flush()).toBe('cat\ufffd');
  });

  it('encodes by greedy longest match, with byte fallback, and round-trips', () => {
    const ids = tok.encode('the cat  sat on it', { bos: true, eos: true });
    expect(ids).toEqual([1, id(`${W}the`), id(`${W}cat`), id(`${W}sat`), id(`${W}on`), id(`${W}it`), 2]);
    expect(tok.encode('thee')).toEqual([id(`${W}the`), id('e')]);
    const withBytes = tok.encode('the é');
    expect(withBytes).toEqual([id(`${W}the`), id(`${W}`), 22 + 0xc3, 22 + 0xa9]);
    for (const s of ["the cat sat on it's.", 'cats sit', 'the é€ cat']) expect(tok.decode(tok.encode(s))).toBe(s);
  });

  it('looks pieces up by string and renders one piece on its own (the TextTokenizer surface)', () => {
    expect(tok.format).toBe('sentencepiece');
    expect([tok.tokenId('</s>'), tok.tokenId('<|transcribe|>'), tok.tokenId(`${W}cat`), tok.tokenId('nope')]).toEqual([
      2,
      4,
      id(`${W}cat`),
      undefined,
    ]);
    expect([tok.pieceText(id(`${W}cat`)), tok.pieceText(id("'s")), tok.pieceText(2), tok.pieceText(22 + 0xc3)]).toEqual(
      [' cat', "'s", '', ''],
    );
  });

  it('uses unk when no piece and no byte fallback covers a character', () => {
    const small = Tokenizer.fromJSON({
      type: 'sentencepiece',
      pieces: ['<pad>', '<s>', '</s>', '<unk>', `${W}a`],
      bos: 1,
      eos: 2,
      pad: 0,
      unk: 3,
    });
    expect(small.encode('a z')).toEqual([4, 3, 3]);
    expect(small.vocabSize).toBe(5);
  });

  it('accepts [piece, score] and {piece} entries', () => {
    const t = Tokenizer.fromJSON({
      pieces: [['<pad>', 0], ['<s>', 0], ['</s>', 0], { piece: '<unk>' }, [`${W}hi`, -1.5]],
      bos: 1,
      eos: 2,
      pad: 0,
      unk: 3,
    });
    expect(t.decode([4, 4])).toBe('hi hi');
  });

  it('fails with ModelLoadError naming the file and field', () => {
    expect(() => Tokenizer.fromJSON({ ...JSON_TOK, type: 'bpe' }, 'x/tokenizer.json')).toThrow(
      /x\/tokenizer.json.*sentencepiece/,
    );
    expect(() => Tokenizer.fromJSON({ ...JSON_TOK, pieces: [] })).toThrow(ModelLoadError);
    expect(() => Tokenizer.fromJSON({ ...JSON_TOK, eos: 9999 })).toThrow(/"eos"/);
    expect(() => Tokenizer.fromJSON({ ...JSON_TOK, pieces: ['a', 7] })).toThrow(/piece 1/);
    expect(() => Tokenizer.fromJSON(null)).toThrow(ModelLoadError);
  });

  it('loads from a file path in Node, with typed errors for missing or broken files', async () => {
    const dir = tempDir('wnw-tok-');
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(JSON_TOK));
    writeFileSync(join(dir, 'bad.json'), '{"pieces": [');
    const t = await Tokenizer.load(join(dir, 'tokenizer.json'));
    expect(t.decode(t.encode('the cat'))).toBe('the cat');
    await expect(Tokenizer.load(join(dir, 'missing.json'))).rejects.toThrow(ModelLoadError);
    await expect(Tokenizer.load(join(dir, 'bad.json'))).rejects.toThrow(/not valid JSON/);
  });
});
