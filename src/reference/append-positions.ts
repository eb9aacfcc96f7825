/**
 * The position entries a decode step's appends set (qkv_rope.wgsl append_positions): the
 * step's sequence position into the pool's entry of each (layer, KV head)'s new slot, as
 * Residency.appendText sets its CPU mirror.
 */
export function appendPositions(positions: Int32Array, pos: number, slots: ArrayLike<number>): Int32Array {
  for (let i = 0; i < slots.length; i++) positions[slots[i]] = pos;
  return positions;
}
