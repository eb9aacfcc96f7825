// The bindings of the decoder's weight products (matmul.wgsl, matvec.wgsl): W [rows, cols]
// in WEIGHT_FORMAT (read by weight_tiles.wgsl), X, Y and their params; ACC (bool) turns "="
// into "+=" (the residual add fused into o_proj and down_proj). xOff: X's first float.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

//#include weight_tiles.wgsl

fn store(i: u32, v: f32) {
  if (ACC) { y[i] += v; } else { y[i] = v; }
}
