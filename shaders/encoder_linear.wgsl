// Whisper-family audio encoder: Linear (PyTorch [out, in]).
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Activations are time-major [rows, width]; no workgroup barriers (unreliable or slow on
// CPU implementations of WebGPU). W is packed, so this kernel declares its own bindings
// (the others share encoder_io.wgsl's).
// Constants: BIAS, GELU, ACC (bools), WEIGHT_FORMAT;
// every encoder pipeline gets every encoder constant (encoderConstants).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

// Y[n, out] (=, or += with ACC) act(X[n, in]·Wᵀ + b): one thread per 4 rows × 4 outputs.
// W is in WEIGHT_FORMAT, read by the tiles of weight_tiles.wgsl.
// Params: a = out (multiple of 4), b = in (multiple of 4, 8, 32 per format), c = n.
@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> lb: array<f32>;
@group(0) @binding(3) var<storage, read_write> ly: array<f32>;
@group(0) @binding(4) var<uniform> lp: Dims;

//#include weight_tiles.wgsl
//#include gelu.wgsl

@compute @workgroup_size(64)
fn linear(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o0 = (wid.x * 64u + lid) * 4u;
  let r0 = (wid.y + wid.z * 65535u) * 4u;
  if (o0 >= lp.a || r0 >= lp.c) { return; }
  let stride = rowWords(lp.b);
  var xr: array<u32, 4>;
  var wr: array<u32, 4>;
  for (var a = 0u; a < 4u; a++) {
    xr[a] = min(r0 + a, lp.c - 1u) * (lp.b / 4u);
    wr[a] = (o0 + a) * stride;
  }
  let acc = tile(xr, wr, lp.b);
  for (var a = 0u; a < 4u; a++) {
    let r = r0 + a;
    if (r >= lp.c) { break; }
    for (var i = 0u; i < 4u; i++) {
      var v = acc[a][i];
      if (BIAS) { v += lb[o0 + i]; }
      if (GELU) { v = gelu(v); }
      let at = r * lp.a + o0 + i;
      if (ACC) { ly[at] += v; } else { ly[at] = v; }
    }
  }
}
