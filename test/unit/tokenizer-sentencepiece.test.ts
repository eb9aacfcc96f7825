import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { Tokenizer } from '../../src/model/tokenizer.js';

// SentencePiece's own ids (training/tokenizer_ids.py) for the calibration transcripts and the test sets' texts.
const MODEL = 'public/models/wnw-ref';
const cases = JSON.parse(readFileSync(`${MODEL}/fixtures/sentencepiece-ids.json`, 'utf8')) as Array<{
  text: string;
  ids: number[];
}>;

describe("the reference model's tokenizer against SentencePiece", () => {
  const tok = Tokenizer.fromJSON(JSON.parse(readFileSync(`${MODEL}/tokenizer.json`, 'utf8')));

  it('encodes every calibration and test-set text to the ids SentencePiece gives', () => {
    expect(tok.model).toBe('bpe');
    expect(cases.length).toBeGreaterThan(50);
    const wrong = cases.filter((c) => JSON.stringify(tok.encode(c.text)) !== JSON.stringify(c.ids));
    expect(wrong.map((c) => c.text)).toEqual([]);
  });
});
