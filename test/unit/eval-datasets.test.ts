import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { clipAudio, parseEvalArgs, readClips, runEval } from '../../src/eval/main.js';
import { parseTextGrid } from '../../src/eval/datasets/textgrid.js';
import { encodeWav } from '../../src/audio/wav.js';
import { toMono16k } from '../../src/audio/decode.js';
import type { Transcriber, TranscriptionResult } from '../../src/types.js';
import { tempDir } from '../helpers/temp.js';
import { fakeTranscriberRest } from '../helpers/fake-transcriber.js';

/** A 16 kHz WAV of `seconds` at a constant level, so clips differ by length and mixing is checkable. */
function wav(path: string, seconds: number, level = 0.25) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, encodeWav([new Float32Array(Math.round(seconds * 16000)).fill(level)], 16000, 'float32'));
}
function text(path: string, s: string) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, s);
}

function textGrid(name: string, intervals: [number, number, string][]) {
  const end = intervals.at(-1)![1];
  return [
    'File type = "ooTextFile"',
    'Object class = "TextGrid"',
    '',
    'xmin = 0 ',
    `xmax = ${end} `,
    'tiers? <exists> ',
    'size = 1 ',
    'item []: ',
    '    item [1]:',
    '        class = "IntervalTier" ',
    `        name = "${name}" `,
    '        xmin = 0 ',
    `        xmax = ${end} `,
    `        intervals: size = ${intervals.length} `,
    ...intervals.flatMap(([a, b, t], i) => [
      `        intervals [${i + 1}]:`,
      `            xmin = ${a} `,
      `            xmax = ${b} `,
      `            text = "${t}" `,
    ]),
    '',
  ].join('\n');
}

/** The model's stand-in: the hypothesis is looked up by the clip's length in samples. */
function fakeLoad(hyps: Map<number, string>, calls: unknown[] = []) {
  return async (): Promise<Transcriber> => ({
    backend: 'fake',
    ...fakeTranscriberRest,
    open: () => Promise.reject(new Error('this fake transcribes only')),
    dispose() {},
    async transcribe(input, call = {}): Promise<TranscriptionResult> {
      calls.push(call);
      const t = hyps.get((input as Float32Array).length) ?? '';
      return {
        text: t,
        rawText: t,
        words: [],
        tokens: [1, 2],
        stats: {
          policy: call.policy ?? 'full',
          budget: 1,
          backend: 'fake',
          audioSeconds: 1,
          audioTokens: 0,
          decodeSteps: 2,
          kv: {
            rGpu: 1,
            rGpuPeak: 1,
            rGpuCpu: 1,
            gpuKvBytes: 0,
            cpuKvBytes: 0,
            textKvPages: 0,
          },
          traffic: {
            mbPerStep: 0,
            mbPerStepMax: 0,
            recallsPerStep: 0,
            releasesPerStep: 0,
          },
          timing: {
            msPerToken: 1,
            prefillMs: 0,
            encodeMs: 0,
            realTimeFactor: 0.1,
          },
          prompt: { reusedPositions: 0, prefilledPositions: 0 },
          stoppedBy: 'eos',
        },
      };
    },
  });
}

async function evalOn(dir: string, flags: string[], hyps: Map<number, string>, calls: unknown[] = []) {
  let log = '';
  const args = parseEvalArgs(['--data', dir, '--policies', 'full', '--out', join(dir, 'out.json'), ...flags]);
  const report = await runEval(args, {
    load: fakeLoad(hyps, calls),
    readFile: (p) => readFile(p),
    decode: (b) => toMono16k(b),
    log: (s) => void (log += s),
    tty: false,
  });
  return { report, log };
}

describe('eval --format', () => {
  it('librispeech-long: split/speaker/chapter folders, references from *.trans.txt or a same-named .txt', async () => {
    const dir = tempDir('wnw-lsl-');
    wav(join(dir, 'test-clean/1089/134686/1089-134686-0000.wav'), 0.5);
    text(
      join(dir, 'test-clean/1089/134686/1089-134686.trans.txt'),
      '1089-134686-0000 HE HOPED THERE WOULD BE STEW FOR DINNER\n',
    );
    wav(join(dir, 'dev-clean/84/121123/84-121123-0000.wav'), 0.25);
    text(join(dir, 'dev-clean/84/121123/84-121123-0000.txt'), 'GO DO YOU HEAR\n');
    wav(join(dir, 'dev-clean/84/121123/84-121123-0001.wav'), 0.1);
    const warnings: string[] = [];
    const clips = await readClips(dir, 'librispeech-long', (s) => warnings.push(s));
    expect(clips).toEqual([
      {
        id: 'dev-clean/84/121123/84-121123-0000',
        wav: join(dir, 'dev-clean/84/121123/84-121123-0000.wav'),
        reference: 'GO DO YOU HEAR',
      },
      {
        id: 'test-clean/1089/134686/1089-134686-0000',
        wav: join(dir, 'test-clean/1089/134686/1089-134686-0000.wav'),
        reference: 'HE HOPED THERE WOULD BE STEW FOR DINNER',
      },
    ]);
    expect(warnings).toEqual([expect.stringMatching(/skipping dev-clean\/84\/121123\/84-121123-0001\.wav/)]);
    // one substitution in 8 words, none in 4: pooled 1/12
    const { report } = await evalOn(
      dir,
      ['--format', 'librispeech-long'],
      new Map([
        [8000, 'he hoped there would be stew for supper'],
        [4000, 'go do you hear'],
      ]),
    );
    expect(report.clips.map((c) => c.runs[0].wer)).toEqual([0, 1 / 8]);
    expect(report.summary[0].wer).toBeCloseTo(1 / 12, 12);
  });

  it('longspeech: a JSONL manifest; French WER normalises as English; --task translate scores BLEU', async () => {
    const dir = tempDir('wnw-longspeech-');
    wav(join(dir, 'audio/ls1.wav'), 0.5);
    wav(join(dir, 'audio/ls2.wav'), 0.25);
    text(
      join(dir, 'test.jsonl'),
      [
        { id: 'ls1', audio: 'audio/ls1.wav', text: 'Bonjour tout le monde.', translation: 'Hello everyone.' },
        { id: 'ls2', audio: 'audio/ls2.wav', text: "L'homme est là.", translation: 'The man is there.' },
      ]
        .map((r) => JSON.stringify(r))
        .join('\n'),
    );
    const clips = await readClips(dir, 'longspeech', () => {});
    expect(clips).toEqual([
      {
        id: 'ls1',
        wav: join(dir, 'audio/ls1.wav'),
        reference: 'Bonjour tout le monde.',
        translation: 'Hello everyone.',
      },
      { id: 'ls2', wav: join(dir, 'audio/ls2.wav'), reference: "L'homme est là.", translation: 'The man is there.' },
    ]);
    // French: the comma goes, the typographic apostrophe folds to ', the period stays: only "ici." vs "là." differs
    const fr = await evalOn(
      dir,
      ['--format', 'longspeech'],
      new Map([
        [8000, 'Bonjour, tout le monde.'],
        [4000, 'L’homme est ici.'],
      ]),
    );
    expect(fr.report.summary[0].wer).toBeCloseTo(1 / 7, 12);
    expect(fr.report.bleu).toBeUndefined();

    const calls: { task?: string; targetLanguage?: string }[] = [];
    const en = await evalOn(
      dir,
      ['--format', 'longspeech', '--task', 'translate', '--target', 'en'],
      new Map([
        [8000, 'Hello everyone.'],
        [4000, 'The man is here.'],
      ]),
      calls,
    );
    expect(calls.every((c) => c.task === 'translate' && c.targetLanguage === 'en')).toBe(true);
    // WER against the translations: "here." for "there." in 6 words
    expect(en.report.summary[0].wer).toBeCloseTo(1 / 6, 12);
    // 13a tokens "Hello everyone ." and "The man is here ." : n-gram matches 7/8, 4/6, 2/4, 0/2 (smoothed to 100/(2*2) %), no brevity penalty
    const expected = Math.exp((Math.log(87.5) + Math.log(400 / 6) + Math.log(50) + Math.log(25)) / 4);
    expect(en.report.bleu).toEqual([{ policy: 'full', budget: 1, bleu: Number(expected.toFixed(2)) }]);
    expect(en.report.clips[1].translation).toBe('The man is there.');
  });

  it('primock57: per-speaker WAVs averaged, both TextGrids merged by start time, tags dropped', async () => {
    const dir = tempDir('wnw-primock-');
    wav(join(dir, 'audio/day1_consultation01_doctor.wav'), 0.5, 0.4);
    wav(join(dir, 'audio/day1_consultation01_patient.wav'), 0.3, 0.2);
    text(
      join(dir, 'transcripts/day1_consultation01_doctor.TextGrid'),
      textGrid('Doctor', [
        [0, 1, ''],
        [1, 2, 'Good morning. <UNSURE>How</UNSURE> can I help?'],
        [2, 3.5, ''],
        [3.5, 4, '<UNIN/> Okay.'],
      ]),
    );
    text(
      join(dir, 'transcripts/day1_consultation01_patient.TextGrid'),
      textGrid('Patient', [
        [0, 2.2, ''],
        [2.2, 3.4, 'I have a ""cough"".'],
        [3.4, 4, ''],
      ]),
    );
    wav(join(dir, 'audio/day2_consultation01_doctor.wav'), 0.1);
    const warnings: string[] = [];
    const clips = await readClips(dir, 'primock57', (s) => warnings.push(s));
    expect(clips).toEqual([
      {
        id: 'day1_consultation01',
        wav: [join(dir, 'audio/day1_consultation01_doctor.wav'), join(dir, 'audio/day1_consultation01_patient.wav')],
        reference: 'Good morning. How can I help? I have a "cough". Okay.',
      },
    ]);
    expect(warnings).toEqual(['skipping day2_consultation01: no day2_consultation01_patient.wav']);
    // the mix: the two speakers averaged, the shorter padded with silence
    const audio = await clipAudio(clips[0], { readFile: (p) => readFile(p), decode: (b) => toMono16k(b) });
    expect(audio.length).toBe(8000);
    expect(audio[0]).toBeCloseTo(0.3, 6);
    expect(audio[7999]).toBeCloseTo(0.2, 6);
    // 11 reference words; "cold." for "cough." is the only error
    const { report } = await evalOn(
      dir,
      ['--format', 'primock57'],
      new Map([[8000, 'Good morning. How can I help? I have a cold. Okay.']]),
    );
    expect(report.summary[0].wer).toBeCloseTo(1 / 11, 12);
  });

  it('parses TextGrid intervals and the --format, --task options', () => {
    expect(
      parseTextGrid(
        textGrid('x', [
          [0, 1.5, 'a ""b""'],
          [1.5, 2, ''],
        ]),
      ),
    ).toEqual([
      { xmin: 0, xmax: 1.5, text: 'a "b"' },
      { xmin: 1.5, xmax: 2, text: '' },
    ]);
    expect(parseEvalArgs(['--data', 'd', '--out', 'o']).format).toBe('wav-txt');
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--format', 'timit'])).toThrow(/--format must be one of/);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--task', 'translate'])).toThrow(/--target/);
  });
});
