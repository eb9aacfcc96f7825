// Whisper-family audio encoder: AvgPool1d(2).
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Constants: D;
// every encoder pipeline gets every encoder constant (encoderConstants).

//#include encoder_io.wgsl

// y[r, c] = (x[2r, c] + x[2r+1, c]) / 2. in0 = x, dst = y. Params: a = output rows.
@compute @workgroup_size(64)
fn avg_pool2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * 65535u) * 64u + lid;
  if (i >= dims.a * D) { return; }
  let r = i / D;
  let c = i % D;
  dst[i] = 0.5 * (in0[2u * r * D + c] + in0[(2u * r + 1u) * D + c]);
}
