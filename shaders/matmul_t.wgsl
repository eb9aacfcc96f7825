// The transposed product of a PyTorch-layout weight W [rows, cols]: Y[n, cols] (+)= X[n, rows] W,
// i.e. each row of Y is Wᵀ times a row of X. The triage takes gradients back through the
// LM head and each layer's output projection with it (triage.ts); nothing on the decode
// path runs it. One thread per (8 columns of W, row of X): each walks W's rows reading its
// 8 columns as one q4 word and one scale, two f16 word pairs or eight f32 words
// (weights.wgsl's layouts; cols % 8 == 0), so a q4 code is decoded once per product. A matrix
// split into row parts runs one dispatch per part, X read from the part's first row (xOff)
// and Y accumulated (acc = 1).
// Constants: WEIGHT_FORMAT.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32, xStride: u32, acc: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

//#include weights.wgsl

// Elements c0 .. c0 + 7 of row r (c0 % 8 == 0), as quant.dequantizeRow gives them.
fn eight(r: u32, c0: u32) -> array<f32, 8> {
  let base = 4u * r * rowWords(p.cols);
  var e: array<f32, 8>;
  if (WEIGHT_FORMAT == 2u) {
    let word = wordAt(base + c0 / 8u);
    let g = c0 / 32u;
    let s = unpack2x16float(wordAt(base + p.cols / 8u + g / 2u))[g % 2u];
    for (var k = 0u; k < 8u; k++) { e[k] = (f32((word >> (4u * k)) & 15u) - 8.0) * s; }
  } else if (WEIGHT_FORMAT == 1u) {
    for (var k = 0u; k < 4u; k++) {
      let h = unpack2x16float(wordAt(base + c0 / 2u + k));
      e[2u * k] = h.x;
      e[2u * k + 1u] = h.y;
    }
  } else {
    for (var k = 0u; k < 8u; k++) { e[k] = bitcast<f32>(wordAt(base + c0 + k)); }
  }
  return e;
}

@compute @workgroup_size(64)
fn matmul_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c0 = 8u * (wid.x * 64u + lid);
  let t = wid.y;
  if (c0 >= p.cols || t >= p.n) { return; }
  let xb = t * p.xStride + p.xOff;
  var s: array<f32, 8>;
  for (var k = 0u; k < 8u; k++) { s[k] = 0.0; }
  for (var r = 0u; r < p.rows; r++) {
    let xr = x[xb + r];
    let e = eight(r, c0);
    for (var k = 0u; k < 8u; k++) { s[k] += e[k] * xr; }
  }
  let o = t * p.cols + c0;
  for (var k = 0u; k < 8u; k++) {
    if (p.acc != 0u) { y[o + k] += s[k]; } else { y[o + k] = s[k]; }
  }
}
