import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { buildPrompt, promptIds, type AudioPrompt, type PromptOptions } from '../../src/model/text/prompt.js';
import { voxtral } from '../../src/model/families/voxtral.js';
import { qwen2Audio } from '../../src/model/families/qwen2-audio.js';
import { qwen25Omni } from '../../src/model/families/qwen2-5-omni.js';
import { HfTokenizer } from '../../src/model/text/hf.js';
import { TekkenTokenizer } from '../../src/model/text/tekken.js';
import { chatTemplateFrom, readChatTemplate } from '../../src/model/text/load.js';
import { ModelLoadError, WnwError } from '../../src/errors.js';
import { languageCode } from '../../src/model/text/language.js';
import { checkLoadOptions, checkTranscribeOptions } from '../../src/transcribe/options.js';
import { hasJinja2, readJsonFile, referenceIds, referencePrompts, tokenizerDir } from './tokenizer-fixtures.js';

const DIR = tokenizerDir();

/** `f` throws a WnwError BAD_ARGUMENT whose message matches `message`. */
function expectBadArgument(f: () => unknown, message: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(WnwError);
  expect((err as WnwError).code).toBe('BAD_ARGUMENT');
  expect((err as Error).message).toMatch(message);
}
const N = 3;
/** The tokenizer.json tokenizer of one miniature folder (qwen2_5_omni, qwen2_audio or voxtral). */
const hfTok = (flavour: string) =>
  HfTokenizer.fromJSON(
    readJsonFile(join(DIR, flavour, 'tokenizer.json')),
    readJsonFile(join(DIR, flavour, 'tokenizer_config.json')),
  );

// Special-token ids from the Qwen tokenizer's table.
const IM_START = 151644;
const IM_END = 151645;
const ENDOFTEXT = 151643;
const AUDIO = 151646;
const AUDIO_BOS = 151647;
const AUDIO_EOS = 151648;

describe('Voxtral transcription prompt', () => {
  const tekkenJson = readJsonFile(join(DIR, 'voxtral', 'tekken.json')) as {
    vocab: { rank: number; token_str: string | null }[];
  };
  const tekken = TekkenTokenizer.fromJSON(tekkenJson);
  const hf = hfTok('voxtral');
  // "lang:en" is l|an|g|:|en in this vocabulary (see tokenizer-tekken.test.ts): ids = rank + 1000.
  const langEn = ['l', 'an', 'g', ':', 'en'].map((s) => tekkenJson.vocab.find((v) => v.token_str === s)!.rank + 1000);

  it('is <s>[INST][BEGIN_AUDIO] [AUDIO]×N [/INST]lang:en[TRANSCRIBE], from tekken.json and tokenizer.json alike', () => {
    for (const tok of [tekken, hf]) {
      const p = buildPrompt(voxtral.prompt, tok, { language: 'en' });
      expect(p.prefix).toEqual([1, 3, 25]);
      expect(p.instruction).toEqual([4, ...langEn, 34]);
      expect(p.audioToken).toBe(24);
      expect(p.stopTokens).toEqual([2]);
      expect(promptIds(p, N)).toEqual([1, 3, 25, 24, 24, 24, 4, ...langEn, 34]);
    }
  });

  it('drops the lang: part without a language', () => {
    expect(promptIds(buildPrompt(voxtral.prompt, tekken), N)).toEqual([1, 3, 25, 24, 24, 24, 4, 34]);
  });
});

describe('Qwen chat-template prompts', () => {
  /** Text segments encoded by the Python reference (special tokens are placed by id). */
  const enc = (flavour: string, texts: string[]) =>
    referenceIds('encode-qwen', join(DIR, flavour, 'tokenizer.json'), texts);

  it('Qwen2.5-Omni: the ASR system turn and instruction around <|audio_bos|> | <|AUDIO|>×N | <|audio_eos|>', async () => {
    const tok = hfTok('qwen2_5_omni');
    const template = await readChatTemplate(join(DIR, 'qwen2_5_omni'));
    expect(template).toBeDefined();
    const p = buildPrompt(qwen25Omni.prompt, tok, { language: 'en', chatTemplate: template });
    const [sys, nl, user, instr, assistant] = enc('qwen2_5_omni', [
      'system\nYou are a speech recognition model.',
      '\n',
      'user\n',
      'Transcribe the English audio into text without any punctuation marks.',
      'assistant\n',
    ]);
    const prefix = [IM_START, ...sys, IM_END, ...nl, IM_START, ...user, AUDIO_BOS];
    const instruction = [AUDIO_EOS, ...instr, IM_END, ...nl, IM_START, ...assistant];
    expect(p.prefix).toEqual(prefix);
    expect(p.instruction).toEqual(instruction);
    expect(promptIds(p, N)).toEqual([...prefix, AUDIO, AUDIO, AUDIO, ...instruction]);
    expect(p.stopTokens).toEqual([IM_END, ENDOFTEXT]);
    expect(p.templateSource).toBe('folder');
    // The processor's default template renders the same prompt.
    const builtIn = buildPrompt(qwen25Omni.prompt, tok, { language: 'en' });
    expect([builtIn.prefix, builtIn.instruction, builtIn.templateSource]).toEqual([prefix, instruction, 'built-in']);
    // Another language changes only the instruction text.
    const de = buildPrompt(qwen25Omni.prompt, tok, { language: 'de', chatTemplate: template });
    expect(de.prefix).toEqual(prefix);
    expect(tok.decode(de.instruction)).toBe(
      'Transcribe the German audio into text without any punctuation marks.\nassistant\n',
    );
  });

  it('Qwen2-Audio: the template in tokenizer_config.json, its default system turn and numbered audio line', async () => {
    const tok = hfTok('qwen2_audio');
    const template = await readChatTemplate(join(DIR, 'qwen2_audio'));
    expect(template).toBe(chatTemplateFrom({ tokenizerConfig: tok.config }));
    const p = buildPrompt(qwen2Audio.prompt, tok, { language: 'en', chatTemplate: template });
    const [sys, nl, user, instr, assistant] = enc('qwen2_audio', [
      'system\nYou are a helpful assistant.',
      '\n',
      'user\nAudio 1: ',
      '\nDetect the language and recognize the speech: <|en|>',
      'assistant\n',
    ]);
    const prefix = [IM_START, ...sys, IM_END, ...nl, IM_START, ...user, AUDIO_BOS];
    const instruction = [AUDIO_EOS, ...instr, IM_END, ...nl, IM_START, ...assistant];
    expect(promptIds(p, N)).toEqual([...prefix, AUDIO, AUDIO, AUDIO, ...instruction]);
    expect(p.audioToken).toBe(AUDIO);
    const auto = buildPrompt(qwen2Audio.prompt, tok, { chatTemplate: template });
    expect(tok.decode(auto.instruction)).toBe('\nDetect the language and recognize the speech:\nassistant\n');
  });

  it('"none" is no language: each family\'s prompt without a language, never a language called "none"', async () => {
    const recipes = [
      {
        recipe: qwen25Omni.prompt,
        tok: hfTok('qwen2_5_omni'),
        without: 'Transcribe the audio into text without any punctuation marks.',
      },
      {
        recipe: qwen2Audio.prompt,
        tok: hfTok('qwen2_audio'),
        without: 'Detect the language and recognize the speech:',
      },
    ];
    for (const { recipe, tok, without } of recipes) {
      const omitted = buildPrompt(recipe, tok);
      const none = buildPrompt(recipe, tok, { language: 'none' });
      expect([none.prefix, none.instruction]).toEqual([omitted.prefix, omitted.instruction]);
      expect(tok.decode(none.instruction)).toContain(without);
      expect(tok.decode(none.instruction)).not.toMatch(/none/);
      // A code in capitals is the same code.
      expect(buildPrompt(recipe, tok, { language: 'EN' }).instruction).toEqual(
        buildPrompt(recipe, tok, { language: 'en' }).instruction,
      );
    }
    const tekken = TekkenTokenizer.fromJSON(readJsonFile(join(DIR, 'voxtral', 'tekken.json')));
    expect(promptIds(buildPrompt(voxtral.prompt, tekken, { language: 'none' }), N)).toEqual([
      1, 3, 25, 24, 24, 24, 4, 34,
    ]);
  });

  it('a language that is neither a code nor "none" is a BAD_ARGUMENT listing the accepted forms, wherever it is given', () => {
    expect([languageCode(undefined), languageCode('none'), languageCode('de'), languageCode('YUE')]).toEqual([
      undefined,
      undefined,
      'de',
      'yue',
    ]);
    const tok = hfTok('qwen2_audio');
    for (const bad of ['English', 'en-US', '', 'e', 'auto1', 42, null]) {
      for (const f of [
        () => languageCode(bad),
        () => buildPrompt(qwen2Audio.prompt, tok, { language: bad as string }),
        () => checkLoadOptions({ model: 'm', language: bad as string }),
        () => checkTranscribeOptions({ language: bad as string }),
      ]) {
        expectBadArgument(f, /language code of 2 or 3 letters .*"en".* or "none" for no language/);
      }
    }
    expect(() => checkTranscribeOptions({ language: 'none' })).not.toThrow();
  });

  it('task "translate": the recipe\'s translation turn into targetLanguage, from the language when one is given', () => {
    const omni = hfTok('qwen2_5_omni');
    const p = buildPrompt(qwen25Omni.prompt, omni, { task: 'translate', targetLanguage: 'zh', language: 'en' });
    const text = omni.decode(p.prefix) + omni.decode(p.instruction);
    expect(text).toContain('system\nYou are a speech translation model.');
    expect(text).toContain('Listen to the provided English speech and produce a translation in Chinese text.');
    expect(text).not.toContain('speech recognition');
    expect(
      omni.decode(buildPrompt(qwen25Omni.prompt, omni, { task: 'translate', targetLanguage: 'de' }).instruction),
    ).toContain('Listen to the provided speech and produce a translation in German text.');
    const qa = hfTok('qwen2_audio');
    expect(
      qa.decode(
        buildPrompt(qwen2Audio.prompt, qa, { task: 'translate', targetLanguage: 'de', language: 'en' }).instruction,
      ),
    ).toBe('\nDetect the language and translate the speech into German: <|en|>\nassistant\n');
    // Voxtral asks in words, in mistral-common's chat request: <s>[INST][BEGIN_AUDIO] | [AUDIO]×N | text[/INST].
    const tekken = TekkenTokenizer.fromJSON(readJsonFile(join(DIR, 'voxtral', 'tekken.json')));
    const vx = buildPrompt(voxtral.prompt, tekken, { task: 'translate', targetLanguage: 'fr', language: 'en' });
    expect([vx.prefix, vx.instruction.at(-1)]).toEqual([[1, 3, 25], 4]);
    expect(tekken.decode(vx.instruction.slice(0, -1))).toBe('Translate this English audio into French.');
    // The transcription is the default task, and task "transcribe" is the same prompt.
    expect(buildPrompt(qwen2Audio.prompt, qa, { task: 'transcribe', language: 'en' })).toEqual(
      buildPrompt(qwen2Audio.prompt, qa, { language: 'en' }),
    );
  });

  it('a translation without a target, a target without a translation, or a recipe without one is a BAD_ARGUMENT', () => {
    const qa = hfTok('qwen2_audio');
    const tekken = TekkenTokenizer.fromJSON(readJsonFile(join(DIR, 'voxtral', 'tekken.json')));
    const cases: [() => unknown, RegExp][] = [
      [() => buildPrompt(qwen2Audio.prompt, qa, { task: 'translate' }), /task "translate" needs targetLanguage/],
      [
        () => buildPrompt(qwen2Audio.prompt, qa, { task: 'translate', targetLanguage: 'none' }),
        /task "translate" needs targetLanguage/,
      ],
      [() => buildPrompt(qwen2Audio.prompt, qa, { targetLanguage: 'de' }), /targetLanguage is for task "translate"/],
      [
        () => buildPrompt(qwen2Audio.prompt, qa, { task: 'summarise' as 'translate', targetLanguage: 'de' }),
        /task must be one of "transcribe", "translate"/,
      ],
      [
        () => buildPrompt(qwen2Audio.prompt, qa, { task: 'translate', targetLanguage: 'German' }),
        /targetLanguage must be a language code/,
      ],
      [
        () =>
          buildPrompt({ kind: 'mistral-transcription', stop: ['</s>'] }, tekken, {
            task: 'translate',
            targetLanguage: 'de',
          }),
        /not available for this model/,
      ],
      [() => checkTranscribeOptions({ task: 'translate' }), /needs targetLanguage/],
      [() => checkTranscribeOptions({ targetLanguage: 'de' }), /is for task "translate"/],
    ];
    for (const [f, message] of cases) expectBadArgument(f, message);
    expect(() => checkTranscribeOptions({ task: 'translate', targetLanguage: 'de' })).not.toThrow();
  });

  it('says what is wrong with a template or tokenizer that cannot make the prompt', () => {
    const tok = hfTok('qwen2_5_omni');
    expect(() => buildPrompt(qwen25Omni.prompt, tok, { chatTemplate: '{{ messages[0].content }}' })).toThrow(
      /audio placeholder <\|AUDIO\|> exactly once/,
    );
    expect(() => buildPrompt(qwen25Omni.prompt, tok, { chatTemplate: '<|AUDIO|>{% for %}' })).toThrow(ModelLoadError);
    expect(() => buildPrompt(qwen25Omni.prompt, tok, { chatTemplate: 'x<|AUDIO|>y' })).toThrow(
      /between <\|audio_bos\|> and <\|audio_eos\|>/,
    );
    expect(() => buildPrompt(voxtral.prompt, tok)).toThrow(/no <s> token|none of the stop tokens/);
  });
});

describe('prompt ids against the Python reference that follows the upstream processors', () => {
  // (task, language, target): training/hf/prompts.py's case arguments.
  const CASES: [PromptOptions, [string, string, string]][] = [
    [{ task: 'transcribe', language: 'en' }, ['transcribe', 'en', '-']],
    [{ task: 'transcribe', language: 'fr' }, ['transcribe', 'fr', '-']],
    [{ task: 'translate', language: 'en', targetLanguage: 'fr' }, ['translate', 'en', 'fr']],
  ];
  const n = 5;

  /** Each case's prompt equals the reference: the ids with the audio span of n placeholders, and the stop ids with the eos first. */
  function expectReference(prompts: AudioPrompt[], family: string): void {
    const refs = referencePrompts(
      join(DIR, family),
      family,
      n,
      CASES.map(([, args]) => args),
    );
    prompts.forEach((p, i) => {
      const ids = promptIds(p, n);
      expect(ids).toEqual(refs[i].ids);
      expect(refs[i].ids.filter((t) => t === p.audioToken)).toHaveLength(n);
      expect(refs[i].ids.slice(p.prefix.length, p.prefix.length + n)).toEqual(new Array<number>(n).fill(p.audioToken));
      expect(p.stopTokens[0]).toBe(refs[i].eos);
      expect([...p.stopTokens].sort()).toEqual([...refs[i].stop].sort());
    });
  }

  it('Voxtral: the transcription request with lang:en / lang:fr, and the chat request asking for French', () => {
    const tekken = TekkenTokenizer.fromJSON(readJsonFile(join(DIR, 'voxtral', 'tekken.json')));
    for (const tok of [tekken, hfTok('voxtral')])
      expectReference(
        CASES.map(([o]) => buildPrompt(voxtral.prompt, tok, o)),
        'voxtral',
      );
  });

  for (const [family, recipe] of [
    ['qwen2_5_omni', qwen25Omni.prompt],
    ['qwen2_audio', qwen2Audio.prompt],
  ] as const) {
    it(`${family}: the folder's chat template and the built-in one render the reference prompt`, async (ctx) => {
      if (!hasJinja2())
        ctx.skip('the reference renders chat templates with jinja2: install python3-jinja2 for /usr/bin/python3');
      const tok = hfTok(family);
      const chatTemplate = await readChatTemplate(join(DIR, family));
      expect(chatTemplate).toBeDefined();
      expectReference(
        CASES.map(([o]) => buildPrompt(recipe, tok, { ...o, chatTemplate })),
        family,
      );
      expectReference(
        CASES.map(([o]) => buildPrompt(recipe, tok, o)),
        family,
      );
    });
  }
});
