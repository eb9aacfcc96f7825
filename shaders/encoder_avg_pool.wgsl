// Whisper-family audio encoder: AvgPool1d(2).
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Activations are time-major [rows, width]; no workgroup barriers (unreliable or slow on
// CPU implementations of WebGPU). The binding numbers are the ones EncoderPass binds,
// distinct across the encoder's kernels.
// Constants: D;
// every encoder pipeline gets every encoder constant (encoderConstants).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

// y[r, c] = (x[2r, c] + x[2r+1, c]) / 2. Params: a = output rows.
@group(0) @binding(40) var<storage, read> px: array<f32>;
@group(0) @binding(41) var<storage, read_write> py: array<f32>;
@group(0) @binding(42) var<uniform> pp: Dims;

@compute @workgroup_size(64)
fn avg_pool2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * 65535u) * 64u + lid;
  if (i >= pp.a * D) { return; }
  let r = i / D;
  let c = i % D;
  py[i] = 0.5 * (px[2u * r * D + c] + px[(2u * r + 1u) * D + c]);
}
