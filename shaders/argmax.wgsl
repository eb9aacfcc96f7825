// Greedy sampling on the GPU: the token id never needs the logits on the CPU.
// Ties go to the lowest index, as ops.argmax does. One workgroup.
// Constants: VOCAB.

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> token: array<u32>;

var<workgroup> bestV: array<f32, 256>;
var<workgroup> bestI: array<u32, 256>;

@compute @workgroup_size(256)
fn argmax(@builtin(local_invocation_index) lid: u32) {
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  for (var i = lid; i < VOCAB; i += 256u) {
    let v = logits[i];
    if (v > bv || bi == 0xffffffffu) { bv = v; bi = i; }
  }
  bestV[lid] = bv;
  bestI[lid] = bi;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let ov = bestV[lid + s];
      let oi = bestI[lid + s];
      if (oi != 0xffffffffu && (bestI[lid] == 0xffffffffu || ov > bestV[lid] || (ov == bestV[lid] && oi < bestI[lid]))) {
        bestV[lid] = ov;
        bestI[lid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { token[0] = bestI[0]; }
}
