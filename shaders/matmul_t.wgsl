// The transposed product of a PyTorch-layout weight W [rows, cols]: Y[n, cols] (+)= X[n, rows] W,
// i.e. each row of Y is Wᵀ times a row of X. The triage takes gradients back through the
// LM head and each layer's output projection with it (triage.ts); nothing on the decode
// path runs it. One thread per (column of W, row of X), reading W by column through
// weightAt in any of its formats (weights.wgsl): a strided walk that is slow beside
// matmul's tiles, and run a few times a clip. A matrix split into row parts runs one
// dispatch per part, X read from the part's first row (xOff) and Y accumulated (acc = 1).
// Constants: WEIGHT_FORMAT.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32, xStride: u32, acc: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

//#include weights.wgsl

@compute @workgroup_size(64)
fn matmul_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x * 64u + lid;
  let t = wid.y;
  if (c >= p.cols || t >= p.n) { return; }
  let xb = t * p.xStride + p.xOff;
  var s = 0.0;
  for (var r = 0u; r < p.rows; r++) { s += weightAt(r, c, p.cols) * x[xb + r]; }
  let o = t * p.cols + c;
  if (p.acc != 0u) { y[o] += s; } else { y[o] = s; }
}
