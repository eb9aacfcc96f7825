// Embedding gather and audio-embedding placement.
// Each row of x is either a token embedding (ids[row] >= 0) or an audio embedding
// (ids[row] = -1 - audioRow), so the whole prompt [bos][audio][instruction] is built in
// one dispatch (rows past 65,535 workgroups continue on grid row y) and decode reuses
// the entry with a one-row ids buffer.
// Constants (prelude): D.

struct Params { rows: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> table: array<f32>;        // [VOCAB, D]
@group(0) @binding(1) var<storage, read> ids: array<i32>;          // [rows]
@group(0) @binding(2) var<storage, read> audio: array<f32>;        // [audioLength, D]
@group(0) @binding(3) var<storage, read_write> x: array<f32>;      // [rows, D]
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn embed(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }
  let id = ids[row];
  for (var c = lid; c < D; c += 64u) {
    if (id >= 0) {
      x[row * D + c] = table[u32(id) * D + c];
    } else {
      x[row * D + c] = audio[u32(-1 - id) * D + c];
    }
  }
}
