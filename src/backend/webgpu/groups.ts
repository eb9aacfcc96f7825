/** Workgroup grids of the decoder's kernels (their shaders linearise wid.x + wid.y * nwg.x). */

/** Largest workgroup count of one grid dimension WebGPU guarantees. */
export const MAX_GROUPS = 65535;

/** A 1-D workgroup count as a 2-D grid. */
export function grid(groups: number): [number, number] {
  if (groups <= MAX_GROUPS) return [Math.max(1, groups), 1];
  const y = Math.ceil(groups / MAX_GROUPS);
  return [Math.ceil(groups / y), y];
}

/** Workgroups of a decode matvec: 64 rows each. */
export function matvecGroups(rows: number): [number, number] {
  return grid(Math.ceil(rows / 64));
}

/** Workgroups of the prefill matmul: 32x32 output tiles. */
export function matmulGroups(rows: number, n: number): [number, number] {
  return [Math.ceil(rows / 32), Math.ceil(n / 32)];
}
