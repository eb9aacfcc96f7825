/** Tensor element types of a Hugging Face checkpoint, widened to f32 for the decoder. */

export type WeightDtype = 'BF16' | 'F16' | 'F32';

// U32: the packed decoder tensors of a converted folder (src/model/packed-folder.ts).
export const DTYPE_BYTES: Record<string, number> = {
  BF16: 2,
  F16: 2,
  F32: 4,
  F64: 8,
  I64: 8,
  I32: 4,
  U32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

export function isWeightDtype(d: string): d is WeightDtype {
  return d === 'BF16' || d === 'F16' || d === 'F32';
}

let halfTable: Float32Array | null = null;

/** All 65,536 f16 values as f32 (256 KiB, built once): widening becomes a lookup. */
function f16Table(): Float32Array {
  if (halfTable) return halfTable;
  halfTable = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    halfTable[h] =
      e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return halfTable;
}

/**
 * Widens `bytes` (little-endian elements of `dtype`, starting at an even byte offset of
 * an aligned buffer) into `out` from element `at`. bf16 is the upper half of an f32.
 */
export function widenInto(dtype: WeightDtype, bytes: Uint8Array, out: Float32Array, at: number): void {
  if (dtype === 'F32') {
    new Uint8Array(out.buffer, out.byteOffset + at * 4, bytes.byteLength).set(bytes);
    return;
  }
  const src = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
  if (dtype === 'BF16') {
    const dst = new Uint32Array(out.buffer, out.byteOffset + at * 4, src.length);
    for (let i = 0; i < src.length; i++) dst[i] = src[i] << 16;
    return;
  }
  const t = f16Table();
  for (let i = 0; i < src.length; i++) out[at + i] = t[src[i]];
}
