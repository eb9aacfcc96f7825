/**
 * The precision the KV pool stores keys and values in. `f16` halves the pool's GPU
 * memory and its CPU→GPU recall traffic; attention still computes in f32. The prefill's
 * prompt K/V are rounded as they are made, so its own attention sees what the pool will
 * hold and its largest buffers halve too. The GPU packs two halves per u32 word with
 * WGSL's pack2x16float, which needs no shader-f16 feature; the CPU backend rounds what it
 * stores the same way, so both backends decode the same tokens for either precision. The
 * offload store then keeps its CPU copies as f16 too: a recall writes back exactly what
 * the pool would have held.
 */
import { f16Bits, f16Table } from '../model/f16.js';

export type KvPrecision = 'f32' | 'f16';

export const KV_PRECISIONS: readonly KvPrecision[] = ['f32', 'f16'];

/** Bytes of one stored key or value element. */
export function kvElementBytes(p: KvPrecision): number {
  return p === 'f16' ? 2 : 4;
}

/** Bytes of one pool slot: its key and value rows plus its 4-byte position. */
export function slotBytes(headDim: number, elementBytes = 4): number {
  return 2 * elementBytes * headDim + 4;
}

/** The first `count` values of src as binary16 bits (two per u32 word, little-endian: element 2i in the low half). */
export function packF16(src: Float32Array, count: number, out = new Uint16Array(count)): Uint16Array {
  for (let i = 0; i < count; i++) out[i] = f16Bits(src[i]);
  return out;
}

/** Rounds the first `count` values of src to the nearest f16 value into out (f32 storage). */
export function roundF16(src: Float32Array, count: number, out: Float32Array, outOffset = 0): void {
  const t = f16Table();
  for (let i = 0; i < count; i++) out[outOffset + i] = t[f16Bits(src[i])];
}

/** Stored K/V words (`elementBytes` 4: f32, 2: f16 halves) as f32 values. */
export function kvValues(words: ArrayBuffer, elementBytes: number): Float32Array {
  if (elementBytes === 4) return new Float32Array(words);
  const bits = new Uint16Array(words);
  const t = f16Table();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = t[bits[i]];
  return out;
}
