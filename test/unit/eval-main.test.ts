import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { listClips, parseEvalArgs, plannedRuns, runEval, WARMUP_TOKENS } from '../../src/eval/main.js';
import { markdownTable } from '../../src/eval/report.js';
import { ContextTooLongError } from '../../src/errors.js';
import type { LoadOptions, TranscribeOptions, Transcriber, TranscriptionResult } from '../../src/types.js';
import { tempDir } from '../helpers/temp.js';
import { forEvaluation } from '../../src/policy/registry.js';
import { fakeTranscriberRest } from '../helpers/fake-transcriber.js';

// A stand-in for loadTranscriber, local to this test. It "transcribes" by echoing the
// reference stored in the file, dropping the last word for any policy but 'full', so
// the WERs the eval computes are known in advance. Teacher-forced, it gives one logits
// vector per forced token: every policy's equal to the full cache's but at the last step,
// where its greedy token differs.
const FULL_LOGITS = [2, 0, 0, 0];
const LAST_STEP_LOGITS = [0, 2, 0, 0];
function fakeLoad(calls: TranscribeOptions[], loads: LoadOptions[]) {
  return async (o: LoadOptions): Promise<Transcriber> => {
    loads.push(o);
    return {
      backend: 'fake',
      ...fakeTranscriberRest,
      open: () => Promise.reject(new Error('this fake transcribes only')),
      dispose() {},
      async transcribe(input, call = {}): Promise<TranscriptionResult> {
        calls.push(call);
        const words = new TextDecoder()
          .decode(new Uint8Array((input as Float32Array).buffer))
          .trim()
          .split(/\s+/);
        const policy = call.policy ?? 'full';
        if (policy === 'h2o') throw new ContextTooLongError(2e9, 1e9, 'the H2O window');
        const forced = call.probe?.forcedTokens;
        forced?.forEach((_, t) =>
          call.probe?.onLogits?.(
            t,
            Float32Array.from(policy !== 'full' && t === forced.length - 1 ? LAST_STEP_LOGITS : FULL_LOGITS),
          ),
        );
        const text = (policy === 'full' ? words : words.slice(0, -1)).join(' ');
        call.onProgress?.({ phase: 'decode', fraction: 0.5 });
        return {
          text,
          rawText: text,
          words: [],
          tokens: words.map((_, i) => 10 + i),
          stats: {
            policy,
            budget: call.budget ?? 1,
            backend: 'fake',
            audioSeconds: words.length,
            audioTokens: 0,
            decodeSteps: words.length,
            kv: {
              rGpu: policy === 'full' ? 1 : call.budget!,
              rGpuPeak: 1,
              rGpuCpu: 1,
              gpuKvBytes: 0,
              cpuKvBytes: 0,
              textKvPages: 0,
            },
            traffic: {
              mbPerStep: 0.1,
              mbPerStepMax: 0.1,
              recallsPerStep: 0,
              releasesPerStep: 0,
            },
            timing: {
              msPerToken: policy === 'full' ? 10 : 11,
              prefillMs: 0,
              encodeMs: 0,
              realTimeFactor: 0.1,
            },
            prompt: { reusedPositions: 0, prefilledPositions: 0 },
            stoppedBy: 'eos',
          },
        };
      },
    };
  };
}

// Keeps the bytes intact through the Float32Array the eval hands to transcribe.
const decode = async (b: Uint8Array) =>
  new Float32Array(new Uint8Array([...b, 32, 32, 32, 32].slice(0, Math.ceil(b.length / 4) * 4)).buffer);

function dataDir() {
  const dir = tempDir('wnw-eval-');
  // The fake reads the "audio" as text: the clip says exactly its reference.
  for (const [id, ref] of [
    ['b', 'five six seven eight nine ten'],
    ['a', 'one two three four'],
  ]) {
    writeFileSync(join(dir, `${id}.wav`), ref);
    writeFileSync(join(dir, `${id}.txt`), `${ref}\n`);
  }
  writeFileSync(join(dir, 'orphan.wav'), 'x');
  return dir;
}

describe('npm run eval', () => {
  it('parses its arguments', () => {
    const a = parseEvalArgs(
      [
        '--data',
        'd',
        '--policies',
        'full,wnw,snapkv',
        '--budgets',
        '0.2,0.4',
        '--out',
        'o.json',
        '--limit',
        '3',
        '--doc',
      ],
      '/w',
    );
    expect(a).toMatchObject({
      data: ['/w/d'],
      out: '/w/o.json',
      policies: ['full', 'wnw', 'snapkv'],
      budgets: [0.2, 0.4],
      limit: 3,
      kv: 'f32',
    });
    expect(parseEvalArgs(['--data', 'd', '--out', 'o.json', '--kv', 'f16'], '/w').kv).toBe('f16');
    expect(a.doc).toMatch(/docs\/evaluation\.md$/);
    expect(parseEvalArgs(['--data', 'd', '--out', 'o', '--doc', 'R.md'], '/w').doc).toBe('/w/R.md');
    expect(parseEvalArgs(['--data', 'd', '--out', 'o'], '/w').doc).toBeNull();
    expect(parseEvalArgs(['--data', 'd', '--out', 'o'], '/w').block).toBe('eval');
    expect(parseEvalArgs(['--data', 'd', '--out', 'o', '--doc', '--block', 'ablations'], '/w').block).toBe('ablations');
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--block', 'Bad Name'])).toThrow(/--block/);
    expect(parseEvalArgs(['--data', 'a,b', '--out', 'o'], '/w').data).toEqual(['/w/a', '/w/b']);
    expect(() => parseEvalArgs(['--out', 'o'])).toThrow(/--data DIR is required/);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'wnw,foo'])).toThrow(/unknown policy "foo"/);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--limit', '0'])).toThrow(/--limit/);
  });

  it('runs the full cache once per clip, whatever the lists say', () => {
    expect(plannedRuns(['wnw', 'full', 'snapkv'], [0.2, 0.4]).map((r) => `${r.policy}@${r.budget}`)).toEqual([
      'full@1',
      'wnw@0.2',
      'wnw@0.4',
      'snapkv@0.2',
      'snapkv@0.4',
    ]);
  });

  it('lists clips in name order and warns about a wav without a reference', async () => {
    const warnings: string[] = [];
    const clips = await listClips(dataDir(), (s) => warnings.push(s));
    expect(clips.map((c) => [c.id, c.reference])).toEqual([
      ['a', 'one two three four'],
      ['b', 'five six seven eight nine ten'],
    ]);
    expect(warnings).toEqual(['skipping orphan.wav: no orphan.txt reference next to it']);
  });

  it('writes the documented report with pooled WER and a progress line per run', async () => {
    const calls: TranscribeOptions[] = [];
    const loads: LoadOptions[] = [];
    let log = '';
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'wnw',
      '--budgets',
      '0.2,0.4',
      '--out',
      '/tmp/x.json',
      '--backend',
      'cpu',
    ]);
    const report = await runEval(args, {
      load: fakeLoad(calls, loads),
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: (s) => void (log += s),
      tty: false,
    });

    expect(loads).toHaveLength(1);
    expect(loads[0].backend).toBe('cpu');
    // an untimed warm-up of the full cache first (its time would otherwise land in the full row)
    expect(calls[0]).toMatchObject({ policy: 'full', maxNewTokens: WARMUP_TOKENS, probe: { reusePrefill: true } });
    // each clip: the full cache, its tokens forced once more for its logits, then every policy free and teacher-forced
    const perClip = ['full@1', 'full@1 forced', 'wnw@0.2', 'wnw@0.2 forced', 'wnw@0.4', 'wnw@0.4 forced'];
    expect(calls.slice(1).map((c) => `${c.policy}@${c.budget}${c.probe?.forcedTokens ? ' forced' : ''}`)).toEqual([
      ...perClip,
      ...perClip,
    ]);
    expect(calls.slice(1).map((c) => c.probe?.reusePrefill)).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      true,
      true,
      true,
      true,
      true,
      false,
    ]);
    expect(calls.slice(1).every((c) => c.maxNewTokens === undefined)).toBe(true);
    // the forced tokens are the full cache's, one per decode step
    expect(calls[2].probe?.forcedTokens).toEqual([10, 11, 12, 13]);
    expect(
      calls
        .slice(1)
        .filter((c) => c.probe?.forcedTokens)
        .every((c) => c.probe?.onLogits),
    ).toBe(true);
    expect(report.clips.map((c) => c.id)).toEqual(['a', 'b']);
    const a = report.clips[0];
    expect(a).toMatchObject({ id: 'a', reference: 'one two three four' });
    expect(a.audioSeconds).toBeCloseTo(20 / 4 / 16000, 10);
    expect(a.runs[1]).toMatchObject({ policy: 'wnw', budget: 0.2, text: 'one two three', rGpu: 0.2, decodeSteps: 4 });
    expect(a.runs[1].wer).toBeCloseTo(0.25, 10);
    for (const k of ['policy', 'budget', 'text', 'wer', 'rGpu', 'rGpuCpu', 'mbPerStep', 'msPerToken', 'decodeSteps'])
      expect(a.runs[0]).toHaveProperty(k);
    expect(a.runs[0]).not.toHaveProperty('werVsFull'); // the full cache is not measured against itself
    // fidelity: one word of four lost against the full transcript; 3 of 4 forced steps agree
    const kl = (2 * (Math.exp(2) - 1)) / (Math.exp(2) + 3); // KL(softmax[2,0,0,0] ‖ softmax[0,2,0,0])
    expect(a.runs[1].werVsFull).toBeCloseTo(0.25, 10);
    expect(a.runs[1].agreement).toBeCloseTo(0.75, 10);
    expect(a.runs[1].klVsFull).toBeCloseTo(kl / 4, 10);
    expect(a.runs[1].forcedSteps).toBe(4);

    expect(report.summary.map((r) => [r.policy, r.budget])).toEqual([
      ['full', 1],
      ['wnw', 0.2],
      ['wnw', 0.4],
    ]);
    expect(report.summary[0].wer).toBe(0);
    expect(report.summary[1].wer).toBeCloseTo(2 / 10, 10);
    expect(report.summary[1].msPerTokenVsFull).toBeCloseTo(1.1, 10);
    for (const k of ['policy', 'budget', 'wer', 'rGpu', 'rGpuCpu', 'mbPerStep', 'msPerToken', 'msPerTokenVsFull'])
      expect(report.summary[1]).toHaveProperty(k);
    // pooled over the two clips: 2 of 10 full-transcript words lost, 8 of 10 steps agree, KL weighted by steps
    expect(report.summary[0]).toMatchObject({ werVsFull: null, agreement: null, klVsFull: null });
    expect(report.summary[1].werVsFull).toBeCloseTo(0.2, 10);
    expect(report.summary[1].agreement).toBeCloseTo(0.8, 10);
    expect(report.summary[1].klVsFull).toBeCloseTo((2 * kl) / 10, 10);

    expect(log).toMatch(/\[1\/6\] a full WER 0\.0%/);
    expect(log).toMatch(/\[6\/6\] b wnw@0\.4 WER 16\.7%; vs full WER 16\.7%, agreement 83\.3%/);
    expect(log).toMatch(/skipping orphan\.wav/);
  });

  it('records a run that throws and goes on with the next', async () => {
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'h2o,wnw',
      '--budgets',
      '0.2',
      '--out',
      '/tmp/x.json',
    ]);
    const report = await runEval(args, {
      load: fakeLoad([], []),
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    const h2o = report.clips[0].runs.find((r) => r.policy === 'h2o')!;
    expect(h2o).toMatchObject({ text: '', wer: 1, decodeSteps: 0, stoppedBy: 'error' });
    expect(h2o.error).toMatch(/needs .* MiB of KV memory/);
    expect(report.clips[0].runs.map((r) => r.policy)).toEqual(['full', 'h2o', 'wnw']);
    expect(report.summary.find((r) => r.policy === 'h2o')!.wer).toBe(1);
  });

  it('runs ablation variants of a policy as their own rows', async () => {
    const calls: TranscribeOptions[] = [];
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'wnw,wnw:ranking=voice,wnw:selection=global:nVoice=8',
      '--budgets',
      '0.2',
      '--out',
      '/tmp/x.json',
    ]);
    expect(args.policies).toEqual(['wnw', 'wnw:ranking=voice', 'wnw:selection=global:nVoice=8']);
    const report = await runEval(args, {
      load: fakeLoad(calls, []),
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    // the policy factory gets the options, typed (the ablations where only an evaluation puts them); the method's own run gets none
    const expected = [
      ['full', undefined],
      ['wnw', undefined],
      ['wnw', forEvaluation('wnw', { ranking: 'voice' })],
      ['wnw', forEvaluation('wnw', { selection: 'global', nVoice: 8 })],
    ];
    expect(
      calls
        .slice(1, 9)
        .filter((c) => !c.probe?.forcedTokens)
        .map((c) => [c.policy, c.policyOptions]),
    ).toEqual(expected);
    // the teacher-forced decodes run the same variants (the full cache's, for its logits, none)
    expect(
      calls
        .slice(1, 9)
        .filter((c) => c.probe?.forcedTokens)
        .map((c) => [c.policy, c.policyOptions]),
    ).toEqual(expected);
    expect(report.clips[0].runs.map((r) => [r.policy, r.variant])).toEqual([
      ['full', undefined],
      ['wnw', undefined],
      ['wnw', 'ranking=voice'],
      ['wnw', 'selection=global:nVoice=8'],
    ]);
    expect(report.summary.map((r) => [r.policy, r.variant, r.clips])).toEqual([
      ['full', undefined, 2],
      ['wnw', undefined, 2],
      ['wnw', 'ranking=voice', 2],
      ['wnw', 'selection=global:nVoice=8', 2],
    ]);
    const table = markdownTable(report.summary);
    expect(table).toMatch(/^\| wnw \(ranking=voice\) \| 0\.20 \|/m);
    expect(table).toMatch(/^\| wnw \(selection=global, nVoice=8\) \|/m);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'wnw:ranking'])).toThrow(/not key=value/);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'full:ranking=voice'])).toThrow(
      /takes no options/,
    );
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'nope:ranking=voice'])).toThrow(
      /unknown policy "nope"/,
    );
    // a misspelt option fails before any clip runs, instead of running the default under its label
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'wnw:rankng=voice'])).toThrow(
      /policy "wnw" has no option "rankng"; its options are .*ranking/,
    );
  });

  it('goes on when the full cache does not fit: the warm-up failing ends nothing, the full run records its error', async () => {
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'wnw',
      '--budgets',
      '0.2',
      '--out',
      '/tmp/x.json',
      '--limit',
      '1',
    ]);
    const inner = fakeLoad([], []);
    const load = async (o: LoadOptions): Promise<Transcriber> => {
      const t = await inner(o);
      return {
        ...t,
        transcribe: async (input, call = {}) => {
          if ((call.policy ?? 'full') === 'full') throw new ContextTooLongError(4e9, 1e9, 'the full cache');
          return t.transcribe(input, call);
        },
      };
    };
    const report = await runEval(args, {
      load,
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    expect(report.clips[0].runs.map((r) => [r.policy, r.stoppedBy])).toEqual([
      ['full', 'error'],
      ['wnw', 'eos'],
    ]);
    // no full transcript: the fidelity measures are there, null, with the reason
    expect(report.clips[0].runs[1]).toMatchObject({
      werVsFull: null,
      agreement: null,
      klVsFull: null,
      fidelityError: "the full cache's run failed",
    });
    expect(report.summary[1]).toMatchObject({ werVsFull: null, agreement: null, klVsFull: null });
  });

  it('--no-full skips the full cache and the fidelity measures, and only then', async () => {
    expect(parseEvalArgs(['--data', 'd', '--out', 'o'], '/w').full).toBe(true);
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'full,wnw',
      '--budgets',
      '0.2',
      '--out',
      '/tmp/x.json',
      '--no-full',
    ]);
    expect(args.full).toBe(false);
    expect(plannedRuns(args.policies, args.budgets, false)).toEqual([{ policy: 'wnw', budget: 0.2 }]);
    const calls: TranscribeOptions[] = [];
    const report = await runEval(args, {
      load: fakeLoad(calls, []),
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    expect(calls.map((c) => `${c.policy}@${c.budget}${c.probe?.forcedTokens ? ' forced' : ''}`)).toEqual([
      'wnw@0.2',
      'wnw@0.2',
      'wnw@0.2',
    ]); // warm-up, then one run per clip
    expect(report.clips[0].runs[0]).not.toHaveProperty('werVsFull');
    expect(report.summary).toMatchObject([{ policy: 'wnw', werVsFull: null, agreement: null, msPerTokenVsFull: null }]);
    expect(() => parseEvalArgs(['--data', 'd', '--out', 'o', '--policies', 'full', '--no-full'])).toThrow(
      /no policy to run/,
    );
  });

  it('records a teacher-forced decode that fails and goes on', async () => {
    const args = parseEvalArgs([
      '--data',
      dataDir(),
      '--policies',
      'wnw',
      '--budgets',
      '0.2',
      '--out',
      '/tmp/x.json',
      '--limit',
      '1',
    ]);
    const inner = fakeLoad([], []);
    const load = async (o: LoadOptions): Promise<Transcriber> => {
      const t = await inner(o);
      // a backend that returns no logits: the comparison cannot be made
      return {
        ...t,
        transcribe: (input, call = {}) =>
          t.transcribe(input, { ...call, probe: { ...call.probe, onLogits: undefined } }),
      };
    };
    const report = await runEval(args, {
      load,
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    const wnw = report.clips[0].runs[1];
    expect(wnw.werVsFull).toBeNull(); // without the full cache's logits there is no reference at all
    expect(wnw.fidelityError).toMatch(/logits for 0 of 4 steps/);
  });

  it('respects --limit', async () => {
    const args = parseEvalArgs(['--data', dataDir(), '--policies', 'full', '--out', '/tmp/x.json', '--limit', '1']);
    const report = await runEval(args, {
      load: fakeLoad([], []),
      readFile: async (p) => new Uint8Array(await readFile(p)),
      decode,
      log: () => {},
      tty: false,
    });
    expect(report.clips.map((c) => c.id)).toEqual(['a']);
    expect(report.summary.map((r) => r.policy)).toEqual(['full']);
  });
});
