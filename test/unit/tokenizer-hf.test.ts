import { describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HfTokenizer } from '../../src/model/text/hf.js';
import { TekkenTokenizer } from '../../src/model/text/tekken.js';
import { loadTextTokenizer, tokenizerFromFiles } from '../../src/model/text/load.js';
import { ModelLoadError } from '../../src/errors.js';
import { readJsonFile, referenceIds, tokenizerDir } from './tokenizer-fixtures.js';

const DIR = tokenizerDir();
const QWEN = join(DIR, 'qwen2_5_omni');
const VOX = join(DIR, 'voxtral');

/** GPT-2's byte -> character map, to name byte tokens in a byte-level vocabulary. */
function byteChar(b: number): string {
  const keep = (x: number) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
  if (keep(b)) return String.fromCharCode(b);
  let n = 0;
  for (let x = 0; x < b; x++) if (!keep(x)) n++;
  return String.fromCharCode(256 + n);
}

const TEXTS = [
  'Hello world, the café is naïve.',
  "Don't worry, it's €3.50 at 10:45!\n\nNew line  here  ",
  'HELLOWorld camelCaseWords and ÉCOLE élève 12345',
  'naïve (combining: nai\u0308ve), 漢字かな, emoji 🙂👍🏽',
  "We'LL see; THE model's heads, layers and segments.\r\n",
];

describe('HfTokenizer: Qwen byte-level BPE tokenizer.json', () => {
  const tok = HfTokenizer.fromJSON(
    readJsonFile(join(QWEN, 'tokenizer.json')),
    readJsonFile(join(QWEN, 'tokenizer_config.json')),
    'tokenizer.json',
  );

  it('has the Qwen special tokens at their real ids and eos from tokenizer_config.json', () => {
    const ids = Object.fromEntries(
      ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|AUDIO|>', '<|audio_bos|>', '<|audio_eos|>', '<|VIDEO|>'].map(
        (s) => [s, tok.tokenId(s)],
      ),
    );
    expect(ids).toEqual({
      '<|endoftext|>': 151643,
      '<|im_start|>': 151644,
      '<|im_end|>': 151645,
      '<|AUDIO|>': 151646,
      '<|audio_bos|>': 151647,
      '<|audio_eos|>': 151648,
      '<|VIDEO|>': 151656,
    });
    expect(tok.vocabSize).toBe(151657);
    expect(tok.eos).toBe(151645);
    expect(tok.bos).toBeUndefined();
    expect(tok.isControl(151645)).toBe(true);
    expect(tok.isControl(300)).toBe(false);
    expect(tok.warnings).toEqual([]);
  });

  it('encodes like an independent Python implementation of Hugging Face BPE (NFC, Qwen split, merges)', () => {
    const expected = referenceIds('encode-qwen', join(QWEN, 'tokenizer.json'), TEXTS);
    TEXTS.forEach((t, i) => expect(tok.encode(t), JSON.stringify(t)).toEqual(expected[i]));
  });

  it('matches special-token strings inside text, as chat templates need', () => {
    const [user] = referenceIds('encode-qwen', join(QWEN, 'tokenizer.json'), ['user\n']);
    expect(tok.encode('<|im_start|>user\n<|audio_bos|>')).toEqual([151644, ...user, 151647]);
  });

  it('round-trips text and skips special tokens when decoding', () => {
    for (const s of TEXTS) expect(tok.decode(tok.encode(s))).toBe(NFC(s));
    expect(tok.decode(tok.encode('<|im_start|>assistant\nthe café<|im_end|>'))).toBe('assistant\nthe café');
    expect(tok.decode([151900, 151645])).toBe(''); // padded embedding rows and specials render nothing
  });

  it('streams: pushes concatenate to decode(), multi-byte characters held until complete', () => {
    const ids = tok.encode('Speech, text: café 漢字 🙂 done');
    const d = tok.decoder();
    expect(ids.map((i) => d.push(i)).join('') + d.flush()).toBe(tok.decode(ids));
    // "€" = E2 82 AC as three byte tokens.
    const bytes = [0xe2, 0x82, 0xac].map((b) => tok.tokenId(byteChar(b))!);
    const d2 = tok.decoder();
    expect([151644, ...bytes, tok.tokenId('!')!].map((i) => d2.push(i))).toEqual(['', '', '', '€', '!']);
    const d3 = tok.decoder();
    expect(d3.push(tok.tokenId('a')!) + d3.push(bytes[0]) + d3.flush()).toBe('a\ufffd');
  });
});

describe('HfTokenizer: the converted Voxtral tokenizer.json', () => {
  const tekken = TekkenTokenizer.fromJSON(readJsonFile(join(VOX, 'tekken.json')));
  const json = readJsonFile(join(VOX, 'tokenizer.json')) as Record<string, unknown>;
  const hf = HfTokenizer.fromJSON(json, readJsonFile(join(VOX, 'tokenizer_config.json')));

  it('gives the same ids as tekken.json, and the same text back', () => {
    expect(hf.warnings).toEqual([]);
    expect([hf.vocabSize, hf.bos, hf.eos]).toEqual([131072, 1, 2]);
    for (const id of ['[INST]', '[AUDIO]', '[BEGIN_AUDIO]', '[TRANSCRIBE]', '<SPECIAL_500>'])
      expect(hf.tokenId(id)).toBe(tekken.tokenId(id));
    for (const t of [...TEXTS, 'lang:en', 'tab\tand\r\nCRLF, a/b/c //x\n/y']) {
      const ids = tekken.encode(t);
      expect(hf.encode(t), JSON.stringify(t)).toEqual(ids);
      expect(hf.decode(ids)).toBe(tekken.decode(ids));
    }
  });

  it('replaces a wrong Mistral split pattern with a warning (fix_mistral_regex), or keeps it when told', () => {
    const wrong = JSON.parse(JSON.stringify(json)) as {
      pre_tokenizer: { pretokenizers: { pattern: { Regex: string } }[] };
      model: { vocab: Record<string, number>; merges: string[][] };
    };
    // A digit-pair token: the Tekken pattern splits digits one by one so it never applies,
    // while the wrong pattern's runs of up to three digits let it merge.
    wrong.model.vocab['12'] = 131072;
    wrong.model.merges.push(['1', '2']);
    wrong.pre_tokenizer.pretokenizers[0].pattern.Regex =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const seen: string[] = [];
    const fixed = HfTokenizer.fromJSON(wrong, {}, 'v/tokenizer.json', { onWarning: (w) => seen.push(w) });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(/v\/tokenizer.json: the split pattern differs .* using the Tekken pattern/);
    const kept = HfTokenizer.fromJSON(wrong, {}, 'v/tokenizer.json', { fixMistralRegex: false });
    expect(kept.warnings[0]).toMatch(/kept as is/);
    const text = 'HELLOWorld camelCase 12345';
    expect(fixed.encode(text)).toEqual(tekken.encode(text));
    expect(kept.encode(text)).not.toEqual(tekken.encode(text));
  });
});

describe('loadTextTokenizer', () => {
  it('prefers tekken.json in a Voxtral folder, tokenizer.json on request, and reads HF and SentencePiece tokenizer.json', async () => {
    expect((await loadTextTokenizer(VOX)).format).toBe('tekken');
    expect((await loadTextTokenizer(VOX, { prefer: 'tokenizer.json' })).format).toBe('hf');
    const q = await loadTextTokenizer(QWEN);
    expect([q.format, q.eos]).toEqual(['hf', 151645]);
    const sp = tokenizerFromFiles({
      tokenizer: {
        type: 'sentencepiece',
        pieces: ['<pad>', '<s>', '</s>', '<unk>', '\u2581a'],
        bos: 1,
        eos: 2,
        pad: 0,
        unk: 3,
      },
    });
    expect([sp.format, sp.tokenId('</s>'), sp.pieceText(4)]).toEqual(['sentencepiece', 2, ' a']);
  });

  it('names the missing file when a folder has no tokenizer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wnw-tok-'));
    try {
      await expect(loadTextTokenizer(dir)).rejects.toThrow(ModelLoadError);
      await expect(loadTextTokenizer(dir)).rejects.toThrow(/tokenizer.json: missing/);
      cpSync(join(QWEN, 'tokenizer_config.json'), join(dir, 'tokenizer.json'));
      await expect(loadTextTokenizer(dir)).rejects.toThrow(/missing "model"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function NFC(s: string): string {
  return s.normalize('NFC');
}
