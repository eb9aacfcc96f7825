import { describe, expect, it } from 'vitest';
import {
  docBlock,
  markdownTable,
  mergeReports,
  replaceDocBlock,
  summarise,
  type ClipRecord,
  type EvalReport,
  type RunRecord,
} from '../../src/eval/report.js';

const run = (
  policy: string,
  budget: number,
  text: string,
  msPerToken: number,
  decodeSteps: number,
  extra: Partial<RunRecord> = {},
): RunRecord => ({
  policy,
  budget,
  text,
  wer: 0,
  rGpu: policy === 'full' ? 1 : budget,
  rGpuCpu: policy === 'full' ? 1 : 2 * budget,
  mbPerStep: policy === 'full' ? 0 : 0.5,
  msPerToken,
  decodeSteps,
  ...extra,
});

const clips: ClipRecord[] = [
  {
    id: 'a',
    audioSeconds: 10,
    reference: 'one two three four',
    runs: [
      run('full', 1, 'one two three four', 10, 10),
      run('wnw', 0.2, 'one two three', 12, 10, { werVsFull: 0.25, agreement: 0.5, klVsFull: 0.4, forcedSteps: 10 }),
    ],
  },
  {
    // the full cache misread a word: against the reference, wnw is right; against the full cache, it is not
    id: 'b',
    audioSeconds: 20,
    reference: 'five six seven eight nine ten',
    runs: [
      run('full', 1, 'five six seven eight nine tin', 20, 30),
      run('wnw', 0.2, 'five six seven eight nine ten', 21, 30, {
        mbPerStep: 1.0,
        werVsFull: 1 / 6,
        agreement: 1,
        klVsFull: 0,
        forcedSteps: 30,
      }),
    ],
  },
];

describe('eval summary', () => {
  const s = summarise(clips);

  it('has one row per (policy, budget), full first', () => {
    expect(s.map((r) => [r.policy, r.budget, r.clips])).toEqual([
      ['full', 1, 2],
      ['wnw', 0.2, 2],
    ]);
  });

  it('pools WER over clips: total errors over total reference words', () => {
    expect(s[0].wer).toBeCloseTo(0.1, 10);
    // One deletion out of 4 + 6 words: 0.1, not the mean of per-clip WERs (0.125).
    expect(s[1].wer).toBeCloseTo(0.1, 10);
  });

  it('pools fidelity: WER against the full transcripts, agreement and KL weighted by the steps compared', () => {
    expect(s[0]).toMatchObject({ werVsFull: null, agreement: null, klVsFull: null });
    expect(s[1].werVsFull).toBeCloseTo(2 / 10, 10); // one deletion in a, one substitution in b
    expect(s[1].agreement).toBeCloseTo((0.5 * 10 + 1 * 30) / 40, 10);
    expect(s[1].klVsFull).toBeCloseTo((0.4 * 10) / 40, 10);
    // a run without a measurement (null) is left out of the pools, not counted as 0
    const withFailure = summarise([
      ...clips,
      {
        id: 'c',
        audioSeconds: 5,
        reference: 'x y',
        runs: [
          run('full', 1, '', 0, 0, { error: 'too long' }),
          run('wnw', 0.2, 'x', 5, 2, { werVsFull: null, agreement: null, klVsFull: null }),
        ],
      },
    ]);
    expect(withFailure[1].werVsFull).toBeCloseTo(2 / 10, 10);
    expect(withFailure[1].agreement).toBeCloseTo(35 / 40, 10);
  });

  it('pools the stop-token shift over the steps of clips where the full cache stopped, and only those', () => {
    expect(s[1].stopShift).toBeNull();
    const shifted = summarise([
      { ...clips[0], runs: [clips[0].runs[0], { ...clips[0].runs[1], stopShift: 3 }] },
      { ...clips[1], runs: [clips[1].runs[0], { ...clips[1].runs[1], stopShift: 1 }] },
    ]);
    expect(shifted[1].stopShift).toBeCloseTo((3 * 10 + 1 * 30) / 40, 10);
    const oneStopped = summarise([
      { ...clips[0], runs: [clips[0].runs[0], { ...clips[0].runs[1], stopShift: 3 }] },
      clips[1],
    ]);
    expect(oneStopped[1].stopShift).toBeCloseTo(3, 10);
  });

  it('weights ms/token and MB/step by decode steps and compares with the full cache', () => {
    expect(s[0].msPerToken).toBeCloseTo((10 * 10 + 20 * 30) / 40, 10);
    expect(s[1].msPerToken).toBeCloseTo((12 * 10 + 21 * 30) / 40, 10);
    expect(s[1].msPerTokenVsFull).toBeCloseTo(750 / 700, 10);
    expect(s[1].mbPerStep).toBeCloseTo((0.5 * 10 + 1.0 * 30) / 40, 10);
    expect(s[1].rGpu).toBeCloseTo(0.2, 10);
    expect(s[1].rGpuCpu).toBeCloseTo(0.4, 10);
  });

  it('prints a markdown table with a row per summary line', () => {
    const t = markdownTable(s).split('\n');
    expect(t).toHaveLength(4);
    expect(t[0]).toMatch(/^\| policy \| budget \| WER %/);
    expect(t[0]).toMatch(
      /^\| policy \| budget \| WER % \| WER vs full % \| agreement \| KL vs full \| stop shift \| steps vs full \| attn covered \| r_GPU \| r_GPU peak \|/,
    );
    expect(t[2]).toMatch(/^\| full \| – \| 10\.00 \| – \| – \| – \| – \| – \| – \| 1\.000 \| – \|/);
    expect(t[3]).toMatch(
      /^\| wnw \| 0\.20 \| 10\.00 \| 20\.00 \| 0\.875 \| 0\.100 \| – \| 1\.00 \| – \| 0\.200 \| – \| 0\.400 \| 0\.875 \| 18\.8 \| 1\.07× \| 2 \|$/,
    );
  });

  it('reports the peak r_GPU over clips and the decode steps against the full cache', () => {
    const early = summarise([
      { ...clips[0], runs: [clips[0].runs[0], { ...clips[0].runs[1], rGpuPeak: 0.21, decodeSteps: 5 }] },
      { ...clips[1], runs: [clips[1].runs[0], { ...clips[1].runs[1], rGpuPeak: 0.19, decodeSteps: 15 }] },
    ]);
    expect(early[1].rGpuPeak).toBeCloseTo(0.21, 12);
    expect(early[1].stepsVsFull).toBeCloseTo(20 / 40, 12);
    expect(early[0].stepsVsFull).toBeNull();
    expect(markdownTable(early).split('\n')[3]).toMatch(/\| – \| 0\.50 \| – \| 0\.200 \| 0\.210 \|/);
  });
});

describe('doc block', () => {
  const doc = '# wnw\n\nintro\n\n<!-- eval:begin -->\nold table\n<!-- eval:end -->\n\nmore\n';

  it('replaces only what lies between the markers, and is idempotent', () => {
    const block = docBlock({ clips, summary: summarise(clips) }, 'npm run eval -- --data x');
    const once = replaceDocBlock(doc, block);
    expect(once).not.toMatch(/old table/);
    expect(once.startsWith('# wnw\n\nintro\n\n<!-- eval:begin -->\n| policy |')).toBe(true);
    expect(once.endsWith('<!-- eval:end -->\n\nmore\n')).toBe(true);
    expect(once).toMatch(/Generated by `npm run eval -- --data x`/);
    // the caption says which number answers which question
    expect(once).toMatch(
      /WER % is against the reference text: it answers how well the model and the policy together transcribe/,
    );
    expect(once).toMatch(/WER vs full %, agreement and KL vs full answer what the policy loses against the full cache/);
    expect(replaceDocBlock(once, block)).toBe(once);
  });

  it('rewrites a named block and leaves the others', () => {
    const two = `${doc}\n<!-- ablations:begin -->\nold ablations\n<!-- ablations:end -->\n`;
    const out = replaceDocBlock(two, 'new ablations', 'ablations');
    expect(out).toMatch(/old table/);
    expect(out).toMatch(/<!-- ablations:begin -->\nnew ablations\n<!-- ablations:end -->/);
    expect(() => replaceDocBlock(doc, 'x', 'ablations')).toThrow(/ablations:begin/);
  });

  it('refuses a doc without the markers', () => {
    expect(() => replaceDocBlock('# no markers\n', 'x')).toThrow(/eval:begin/);
  });
});

describe('merging a re-run into a report', () => {
  const meta = {
    model: 'm',
    backend: 'CPU',
    date: '2026-01-01T00:00:00.000Z',
    data: 'set',
    command: 'npm run eval -- --data set',
  };
  const withQuest = clips.map((c) => ({
    ...c,
    runs: [
      ...c.runs,
      run('quest', 0.2, c.reference, 11, 10, { werVsFull: 0.1, agreement: 0.3, klVsFull: 1, forcedSteps: 10 }),
    ],
  }));
  const base: EvalReport = { meta, clips: withQuest, summary: summarise(withQuest) };
  const rerun = clips.map((c) => ({
    ...c,
    runs: [
      run('full', 1, c.runs[0].text, 9, c.runs[0].decodeSteps),
      run('wnw', 0.2, c.reference, 8, c.runs[1].decodeSteps, {
        werVsFull: 0.1,
        agreement: 0.9,
        klVsFull: 0.1,
        forcedSteps: 10,
      }),
    ],
  }));
  const update: EvalReport = {
    meta: { ...meta, date: '2026-02-02T00:00:00.000Z', command: 'npm run eval -- --data set --policies full,wnw' },
    clips: rerun,
    summary: summarise(rerun),
  };

  it("puts the update's runs in place of the base's, keeps the others and their order, and recomputes the summary", () => {
    const m = mergeReports(base, update);
    expect(m.summary.map((r) => r.policy)).toEqual(['full', 'wnw', 'quest']);
    expect(m.summary[1].agreement).toBeCloseTo(0.9, 12);
    expect(m.summary[2].agreement).toBeCloseTo(0.3, 12);
    expect(m.clips[0].runs.map((r) => r.msPerToken)).toEqual([9, 8, 11]);
    // Time ratios stay those of the run each row came from.
    expect(m.summary[1].msPerTokenVsFull).toBeCloseTo(update.summary[1].msPerTokenVsFull!, 12);
    expect(m.summary[2].msPerTokenVsFull).toBeCloseTo(base.summary[2].msPerTokenVsFull!, 12);
    expect(m.meta!.updates).toEqual([
      { date: '2026-02-02T00:00:00.000Z', command: update.meta!.command, rows: ['full', 'wnw'] },
    ]);
    expect(docBlock(m, meta.command)).toMatch(
      /The rows of full, wnw were re-run on 2026-02-02T00:00:00.000Z by `npm run eval -- --data set --policies full,wnw`/,
    );
    // The base is untouched.
    expect(base.clips[0].runs.map((r) => r.msPerToken)).toEqual([10, 12, 11]);
  });

  it('refuses reports of different clips', () => {
    expect(() => mergeReports(base, { ...update, clips: update.clips.slice(1) })).toThrow(/different clips/);
  });
});
