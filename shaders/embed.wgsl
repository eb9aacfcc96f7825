// Embedding gather. Each row of x is either a token row (ids[row] >= 0), written here,
// or an audio row (ids[row] = -1 - audioRow), which the prefill wrote into x already
// (no second prompt-sized buffer) and this pass leaves as it is; the whole prompt
// [prefix][audio][instruction] takes one dispatch (rows past 65,535 workgroups continue on
// grid row y) and decode reuses the entry with a one-row ids buffer.
// The table is in WEIGHT_FORMAT, bound as vec4<u32> words and read by weights.wgsl.
// A table larger than one storage binding is split by rows [row0, rowEnd) into parts,
// one dispatch per part: a part writes the token rows whose id falls in its range.
// rowEnd = 0: the table's end.
// Constants (prelude): D, WEIGHT_FORMAT.

struct Params { rows: u32, row0: u32, rowEnd: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;     // rows [row0, rowEnd) of [VOCAB, D]
@group(0) @binding(1) var<storage, read> ids: array<i32>;          // [rows]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;      // [rows, D]
@group(0) @binding(3) var<uniform> p: Params;

//#include weights.wgsl

@compute @workgroup_size(64)
fn embed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let id = ids[row];
  if (id >= 0) {
    let t = u32(id);
    if (t < p.row0 || (p.rowEnd != 0u && t >= p.rowEnd)) { return; }
    for (var c = lid; c < D; c += 64u) { x[row * D + c] = weightAt(t - p.row0, c, D); }
  }
}
