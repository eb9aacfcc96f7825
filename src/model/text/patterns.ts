/**
 * Pre-tokenizer split patterns. They are written for Rust engines (tiktoken's
 * fancy-regex, the tokenizers crate's Oniguruma); JavaScript's `u` mode understands the
 * same property classes and lookahead, but its `\s` differs from Unicode White_Space
 * (it adds U+FEFF and misses U+0085), so `\s`/`\S` are rewritten to the property.
 */

/** The Tekken split pattern, which some converted tokenizer.json files got wrong. */
export const MISTRAL_PATTERN =
  '[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+' +
  '|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*' +
  '|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';

/** A global Unicode RegExp for a split pattern that uses only JS-compatible syntax plus \s/\S. */
export function splitRegExp(pattern: string): RegExp {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\' && i + 1 < pattern.length) {
      const n = pattern[i + 1];
      out += n === 's' ? '\\p{White_Space}' : n === 'S' ? '\\P{White_Space}' : c + n;
      i++;
    } else {
      out += c;
    }
  }
  return new RegExp(out, 'gu');
}

/** The pieces of `text` the pattern matches, in order (what tiktoken's split yields). */
export function splitPieces(re: RegExp, text: string): string[] {
  re.lastIndex = 0;
  const out: string[] = [];
  for (const m of text.matchAll(re)) if (m[0].length > 0) out.push(m[0]);
  return out;
}
