/**
 * The soak's flat criteria (issue 28): GPU bytes after the last run within 1 % of those after
 * run 2, the JS heap within 5 %, and every run ended without an error. Run 1 is left out of
 * the reference because what a first run makes once (caches, pipelines) is not growth.
 */
export interface RunMemory {
  run: number;
  gpuBytes: number;
  heapBytes: number | null;
  error: string | null;
}

export interface Flatness {
  pass: boolean;
  checks: { what: string; pass: boolean }[];
  gpuBytesGrowth: number;
  heapGrowth: number | null;
}

export const GPU_TOLERANCE = 0.01;
export const HEAP_TOLERANCE = 0.05;

export function flatness(runs: readonly RunMemory[]): Flatness {
  const second = runs.find((r) => r.run === 2);
  const last = runs.at(-1);
  if (!second || !last || last.run < 2) throw new Error('the flat criteria need at least 2 runs');
  const growth = (a: number, b: number) => (b - a) / a;
  const gpuBytesGrowth = growth(second.gpuBytes, last.gpuBytes);
  const heapGrowth =
    second.heapBytes !== null && last.heapBytes !== null ? growth(second.heapBytes, last.heapBytes) : null;
  const pct = (x: number) => `${(100 * x).toFixed(2)} %`;
  const failed = runs.filter((r) => r.error !== null);
  const checks = [
    {
      what: `GPU bytes after run ${last.run} (${last.gpuBytes}) vs after run 2 (${second.gpuBytes}): ${pct(gpuBytesGrowth)}, within ${pct(GPU_TOLERANCE)}`,
      pass: Math.abs(gpuBytesGrowth) <= GPU_TOLERANCE,
    },
    heapGrowth === null
      ? { what: 'JS heap: not measurable in this browser (performance.memory)', pass: false }
      : {
          what: `JS heap after run ${last.run} (${last.heapBytes}) vs after run 2 (${second.heapBytes}): ${pct(heapGrowth)}, within ${pct(HEAP_TOLERANCE)}`,
          pass: Math.abs(heapGrowth) <= HEAP_TOLERANCE,
        },
    {
      what: `runs without an error: ${runs.length - failed.length} of ${runs.length}${failed.length ? ` (run ${failed.map((r) => r.run).join(', ')})` : ''}`,
      pass: failed.length === 0,
    },
  ];
  return { pass: checks.every((c) => c.pass), checks, gpuBytesGrowth, heapGrowth };
}
