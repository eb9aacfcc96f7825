// Whisper-family audio encoder: LayerNorm (with bias).
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Activations are time-major [rows, width]; no workgroup barriers (unreliable or slow on
// CPU implementations of WebGPU). The binding numbers are the ones EncoderPass binds,
// distinct across the encoder's kernels.
// Constants: D, EPS;
// every encoder pipeline gets every encoder constant (encoderConstants).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

// One thread per row. Params: a = rows.
@group(0) @binding(10) var<storage, read> nx: array<f32>;
@group(0) @binding(11) var<storage, read> ng: array<f32>;
@group(0) @binding(12) var<storage, read> nb: array<f32>;
@group(0) @binding(13) var<storage, read_write> ny: array<f32>;
@group(0) @binding(14) var<uniform> np: Dims;

@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * 65535u) * 64u + lid;
  if (row >= np.a) { return; }
  let base = row * D;
  var mean = 0.0;
  for (var c = 0u; c < D; c++) { mean += nx[base + c]; }
  mean /= f32(D);
  var v = 0.0;
  for (var c = 0u; c < D; c++) { let t = nx[base + c] - mean; v += t * t; }
  let inv = 1.0 / sqrt(v / f32(D) + EPS);
  for (var c = 0u; c < D; c++) { ny[base + c] = (nx[base + c] - mean) * inv * ng[c] + nb[c]; }
}
