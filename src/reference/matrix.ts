/**
 * A weight matrix as the CPU decoder reads it: f32 values, or a packed f16/q4 matrix
 * (src/model/quant.ts) whose rows are dequantised a tile at a time as a product reads them
 * (a q4 matvec dequantises each weight where it multiplies it: ops.ts). A tile holds exactly
 * the f32 values `dequantize` would give, and the products run the same f32 kernels over it,
 * so a packed matrix gives bit for bit the results of its dequantised copy without that copy
 * ever existing (Voxtral's q4 decoder is 2.1 GiB packed, 15 GiB in f32).
 */
import { dequantizeRow, type PackedMatrix } from '../model/quant.js';

export type Matrix = Float32Array | PackedMatrix;

/** f32 values per tile: small enough to stay in cache between its dequantisation and its use. */
const TILE_VALUES = 1 << 16;

let scratch = new Float32Array(0);

/** Rows per tile for K = cols: a multiple of 4 (the kernels' row block), at least 4. */
export function tileRows(cols: number): number {
  return Math.max(4, 4 * Math.floor(TILE_VALUES / (4 * cols)));
}

/** Rows [row0, row0 + rows) of a packed matrix as f32, in a scratch array reused by the next call. */
export function dequantizeTile(m: PackedMatrix, row0: number, rows: number): Float32Array {
  const n = rows * m.cols;
  if (scratch.length < n) scratch = new Float32Array(n);
  for (let r = 0; r < rows; r++) dequantizeRow(m, row0 + r, scratch, r * m.cols);
  return scratch;
}

/** Row r of `m` ([*, cols]) into out at offset: the embedding lookup. */
export function matrixRow(m: Matrix, r: number, cols: number, out: Float32Array, offset = 0): void {
  if (m instanceof Float32Array) out.set(m.subarray(r * cols, (r + 1) * cols), offset);
  else dequantizeRow(m, r, out, offset);
}

/** The bytes a matrix occupies as held (packed bytes for a packed one). */
export function matrixBytes(m: Matrix): number {
  return m instanceof Float32Array ? m.byteLength : m.data.byteLength;
}
