/**
 * focus.wgsl against word timing's focusOf (src/reference/focus.ts) at shipped scale: 30
 * minutes of Voxtral's token rate (22,500 positions) with five anchors summed among seven
 * exported rows, exact ties (every value equal: the lowest positions win), fewer than four
 * positions with mass (the `weights[i] <= 0` skip) and none at all (-1). The four positions
 * and their summed weights must be those focusOf keeps, bit for bit, so the focus is equal.
 */
import { anchorSum, focusOf } from '../../src/reference/focus.js';
import { FOCUS_ENTRIES, focusOfReadback } from '../../src/backend/webgpu/attention-ops.js';
import { sharedUniforms } from '../../src/gpu/op.js';
import { rng } from '../../src/model/testing.js';
import { loadKernels } from './gpu-kernels.js';
import { gpu, read, submit, upload, type CheckResult } from './gpu-util.js';

type Fill = 'peaked' | 'flat' | 'sparse' | 'zero';

/** Rows [rows][T], flat: softmax-like and peaked, all equal, two positive positions, or all zero. */
function rowsOf(rows: number, T: number, seed: number, fill: Fill): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(rows * T);
  if (fill === 'zero') return out;
  if (fill === 'sparse') {
    out[T + 17] = 0.25; // row 1: summed only where at least two rows are
    out[T - 3] = 0.5;
    return out;
  }
  for (let h = 0; h < rows; h++) {
    const peak = Math.floor(r() * T);
    let s = 0;
    for (let p = 0; p < T; p++)
      s += out[h * T + p] = fill === 'flat' ? 1 : Math.exp(-Math.abs(p - peak) / 60) * r() + 1e-5 * r();
    for (let p = 0; p < T; p++) out[h * T + p] /= s;
  }
  return out;
}

/** focusOf's four positions as a sort states them: mass > 0, more weight first, the lower position on a tie. */
function topFour(sum: Float32Array): number[] {
  return Array.from(sum.keys())
    .filter((p) => sum[p] > 0)
    .sort((a, b) => sum[b] - sum[a] || a - b)
    .slice(0, 4);
}

async function focusCheck(
  name: string,
  heads: number,
  rows: number,
  T: number,
  seed: number,
  fill: Fill,
): Promise<CheckResult> {
  const t0 = performance.now();
  const { ctx } = await gpu();
  const k = await loadKernels();
  const w = rowsOf(rows, T, seed, fill);
  const own: GPUBuffer[] = [];
  const bufs = { weights: upload(ctx, w), top: upload(ctx, new Uint32Array(FOCUS_ENTRIES).fill(7)) };
  submit(
    ctx,
    k.focusTop.run(
      bufs,
      { heads, audioLength: T },
      sharedUniforms(ctx, (b) => own.push(b)),
    ),
  );
  const bytes = await read(ctx, bufs.top, 4 * FOCUS_ENTRIES);
  for (const b of [...Object.values(bufs), ...own]) ctx.destroy(b);
  const sum = anchorSum(
    Array.from({ length: rows }, (_, r) => w.subarray(r * T, (r + 1) * T)),
    Array.from({ length: heads }, (_, i) => i),
    T,
  )!;
  const want = topFour(sum);
  const pos = Array.from(new Uint32Array(bytes, 0, 4));
  const got = pos.filter((p) => p !== 0xffffffff);
  const gotW = new Uint32Array(bytes, 16, 4);
  const wantW = new Uint32Array(Float32Array.from(want, (p) => sum[p]).buffer);
  const sameTop =
    got.join(',') === want.join(',') &&
    want.every((_, i) => gotW[i] === wantW[i]) &&
    pos.slice(want.length).every((p) => p === 0xffffffff);
  const f = focusOfReadback(bytes);
  const ref = focusOf(sum);
  const pass =
    sameTop && f === ref && (fill !== 'zero' || f === -1) && (fill !== 'flat' || want.join(',') === '0,1,2,3');
  const detail = `${T} positions, ${heads} of ${rows} rows summed (${fill}): top ${sameTop ? "equal to focusOf's" : `DIFFERS (gpu ${pos} want ${want})`}, focus gpu ${f} cpu ${ref}${f === ref ? ' (equal)' : ' (DIFFER)'}; readback ${4 * FOCUS_ENTRIES} bytes instead of ${4 * heads * T}`;
  return { name, pass, detail, ms: performance.now() - t0 };
}

const VOXTRAL_30 = 30 * 60 * 12.5;

export const focusTests: Record<string, () => Promise<CheckResult>> = {
  focus_voxtral_30min: () => focusCheck('focus_voxtral_30min', 5, 7, VOXTRAL_30, 41, 'peaked'),
  focus_partial_workgroup: () => focusCheck('focus_partial_workgroup', 4, 4, 7513, 42, 'peaked'),
  focus_ties: () => focusCheck('focus_ties', 3, 3, 1000, 43, 'flat'),
  focus_two_with_mass: () => focusCheck('focus_two_with_mass', 2, 3, 700, 44, 'sparse'),
  focus_no_mass: () => focusCheck('focus_no_mass', 2, 2, 500, 45, 'zero'),
};
