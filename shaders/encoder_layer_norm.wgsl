// Whisper-family audio encoder: LayerNorm (with bias).
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Constants: D, EPS;
// every encoder pipeline gets every encoder constant (encoderConstants).

//#include encoder_io.wgsl

// One thread per row. in0 = x, in1 = gain, in2 = bias, dst = y. Params: a = rows.
@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * 65535u) * 64u + lid;
  if (row >= dims.a) { return; }
  let base = row * D;
  var mean = 0.0;
  for (var c = 0u; c < D; c++) { mean += in0[base + c]; }
  mean /= f32(D);
  var v = 0.0;
  for (var c = 0u; c < D; c++) { let t = in0[base + c] - mean; v += t * t; }
  let inv = 1.0 / sqrt(v / f32(D) + EPS);
  for (var c = 0u; c < D; c++) { dst[base + c] = (in0[base + c] - mean) * inv * in1[c] + in2[c]; }
}
