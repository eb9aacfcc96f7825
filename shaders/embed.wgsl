// Embedding gather. Each row of x is either a token row (ids[row] >= 0), written here,
// or an audio row (ids[row] = -1 - audioRow), which the prefill wrote into x already
// (no second prompt-sized buffer) and this pass leaves as it is; the whole prompt
// [prefix][audio][instruction] takes one dispatch (rows past 65,535 workgroups continue on
// grid row y) and decode reuses the entry with a one-row ids buffer.
// The table is in a weight format (src/model/quant.ts), bound as u32 words: WEIGHT_FORMAT
// 0 f32 bits, 1 f16 pairs, 2 q4 rows (codes, then f16 group scales, padded to vec4s).
// A table larger than one storage binding is split by rows [row0, rowEnd) into parts,
// one dispatch per part: a part writes the token rows whose id falls in its range.
// rowEnd = 0: the table's end.
// Constants (prelude): D, WEIGHT_FORMAT.

struct Params { rows: u32, row0: u32, rowEnd: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> table: array<u32>;        // rows [row0, rowEnd) of [VOCAB, D]
@group(0) @binding(1) var<storage, read> ids: array<i32>;          // [rows]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;      // [rows, D]
@group(0) @binding(3) var<uniform> p: Params;

// Element c of table row r (r counted within this part), exactly as quant.dequantizeRow.
fn weight(r: u32, c: u32) -> f32 {
  if (WEIGHT_FORMAT == 1u) {
    return unpack2x16float(table[r * (D / 2u) + c / 2u])[c % 2u];
  }
  if (WEIGHT_FORMAT == 2u) {
    let base = r * (D / 8u + 4u * ((D + 255u) / 256u));
    let code = (table[base + c / 8u] >> (4u * (c % 8u))) & 15u;
    let g = c / 32u;
    let s = unpack2x16float(table[base + D / 8u + g / 2u])[g % 2u];
    return (f32(code) - 8.0) * s;
  }
  return bitcast<f32>(table[r * D + c]);
}

@compute @workgroup_size(64)
fn embed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let id = ids[row];
  if (id >= 0) {
    let t = u32(id);
    if (t < p.row0 || (p.rowEnd != 0u && t >= p.rowEnd)) { return; }
    for (var c = lid; c < D; c += 64u) { x[row * D + c] = weight(t - p.row0, c); }
  }
}
