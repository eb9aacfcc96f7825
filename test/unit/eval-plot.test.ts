import { describe, expect, it } from 'vitest';
import { fidelityPlot } from '../../src/eval/plot.js';
import type { SummaryRow } from '../../src/eval/report.js';

const row = (
  policy: string,
  budget: number,
  rGpu: number,
  agreement: number | null,
  werVsFull: number | null,
  variant?: string,
): SummaryRow => ({
  policy,
  budget,
  rGpu,
  agreement,
  werVsFull,
  wer: 0.5,
  rGpuCpu: rGpu,
  mbPerStep: 0,
  msPerToken: 1,
  msPerTokenVsFull: 1,
  klVsFull: 0,
  clips: 1,
  ...(variant ? { variant } : {}),
});

describe('fidelity plot', () => {
  const summary = [
    row('full', 1, 1, null, null),
    row('wnw', 0.2, 0.19, 0.9, 0.2),
    row('wnw', 0.1, 0.09, 0.8, 0.4),
    row('quest', 0.2, 0.2, 0.85, 0.3),
    row('wnw', 0.2, 0.19, 0.5, 0.9, 'summaries=false'),
  ];
  const svg = fidelityPlot([
    { title: 'set-a', summary },
    { title: 'set-b', summary },
  ]);

  it('draws one line per policy and panel through its budgets, by measured r_GPU, without the full cache or ablations', () => {
    expect(svg.startsWith('<svg')).toBe(true);
    const lines = svg.match(/<polyline points="([^"]+)"/g)!;
    // 2 sets × 2 panels × 2 policies (wnw, quest)
    expect(lines).toHaveLength(8);
    const wnw = /<polyline points="([^"]+)" fill="none" stroke="#d62728"/
      .exec(svg)![1]
      .split(' ')
      .map((p) => p.split(',').map(Number));
    expect(wnw).toHaveLength(2);
    expect(wnw[0][0]).toBeLessThan(wnw[1][0]); // sorted by r_GPU
    expect(wnw[0][1]).toBeGreaterThan(wnw[1][1]); // higher agreement is drawn higher (smaller y)
    expect(svg).toMatch(/set-a: agreement/);
    expect(svg).toMatch(/set-b: WER vs full/);
    expect(svg).not.toMatch(/summaries=false/);
    expect((svg.match(/<circle /g) ?? []).length).toBe(4 * 3);
  });
});
