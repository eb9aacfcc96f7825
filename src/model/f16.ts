/** IEEE binary16 conversions, for f16 weights and an f16 KV pool alike. */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of x (as f32 first), rounded to nearest, ties to even. */
export function f16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 112; // rebias 127 -> 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the full 24-bit significand into 10 bits.
    if (e < -10) return sign;
    const full = mant | 0x800000;
    const shift = 14 - e;
    const rest = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    let m = full >>> shift;
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m; // a carry into 0x400 is the smallest normal: the encoding still holds
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && m & 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      if (++e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

/** The value of binary16 bits h. */
export function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

let values: Float32Array | null = null;

/** The value of every binary16 bit pattern, built on first use. */
export function f16Table(): Float32Array {
  if (!values) {
    values = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) values[h] = f16Value(h);
  }
  return values;
}
