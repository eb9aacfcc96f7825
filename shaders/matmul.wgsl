// Prefill product with a PyTorch-layout weight W [rows, cols]: Y[n, rows] = X[n, cols] W^T.
// ACC (bool) turns "=" into "+=": the residual add fused into o_proj and down_proj.
// WEIGHT_FORMAT (src/model/quant.ts): 0 f32 bits, 1 f16 pairs (cols % 8 == 0), 2 q4
// (cols % 32 == 0, codes then f16 scales per row); W is bound as vec4<u32> words in every
// format and f32 bitcasts them back, exactly.
// Constants: ACC, WEIGHT_FORMAT.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn store(i: u32, v: f32) {
  if (ACC) { y[i] += v; } else { y[i] = v; }
}

// xr: first vec4 of each of the 4 X rows; wr: first vec4 word of each of the 4 W rows.
fn tileF32(xr: array<u32, 4>, wr: array<u32, 4>) -> array<vec4<f32>, 4> {
  var acc: array<vec4<f32>, 4>;
  for (var k = 0u; k < p.cols / 4u; k++) {
    let w0 = bitcast<vec4<f32>>(w4[wr[0] + k]);
    let w1 = bitcast<vec4<f32>>(w4[wr[1] + k]);
    let w2 = bitcast<vec4<f32>>(w4[wr[2] + k]);
    let w3 = bitcast<vec4<f32>>(w4[wr[3] + k]);
    for (var a = 0u; a < 4u; a++) {
      let xv = x4[xr[a] + k];
      acc[a] += vec4<f32>(dot(xv, w0), dot(xv, w1), dot(xv, w2), dot(xv, w3));
    }
  }
  return acc;
}

fn lo16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)); }
fn hi16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)); }

fn tileF16(xr: array<u32, 4>, wr: array<u32, 4>) -> array<vec4<f32>, 4> {
  var acc: array<vec4<f32>, 4>;
  for (var k = 0u; k < p.cols / 8u; k++) {
    let v0 = w4[wr[0] + k];
    let v1 = w4[wr[1] + k];
    let v2 = w4[wr[2] + k];
    let v3 = w4[wr[3] + k];
    let a0 = lo16(v0); let b0 = hi16(v0);
    let a1 = lo16(v1); let b1 = hi16(v1);
    let a2 = lo16(v2); let b2 = hi16(v2);
    let a3 = lo16(v3); let b3 = hi16(v3);
    for (var a = 0u; a < 4u; a++) {
      let xa = x4[xr[a] + 2u * k];
      let xb = x4[xr[a] + 2u * k + 1u];
      acc[a] += vec4<f32>(dot(xa, a0) + dot(xb, b0), dot(xa, a1) + dot(xb, b1),
                          dot(xa, a2) + dot(xb, b2), dot(xa, a3) + dot(xb, b3));
    }
  }
  return acc;
}

// Codes 4s .. 4s+3 of a word (s = 0: elements 0-3, s = 4: elements 4-7), as code - 8.
fn nibbles(v: u32, s: u32) -> vec4<f32> {
  let q = (vec4<u32>(v) >> vec4<u32>(4u * s, 4u * s + 4u, 4u * s + 8u, 4u * s + 12u)) & vec4<u32>(15u);
  return vec4<f32>(q) - vec4<f32>(8.0);
}

fn scaleQ4(rowBase: u32, ng: u32, g: u32) -> f32 {
  return unpack2x16float(w4[rowBase + ng + g / 8u][(g / 2u) % 4u])[g % 2u];
}

// Per 32-weight group: integer codes against X, then one scale per (row of W) and group.
fn tileQ4(xr: array<u32, 4>, wr: array<u32, 4>) -> array<vec4<f32>, 4> {
  let ng = p.cols / 32u;
  var acc: array<vec4<f32>, 4>;
  for (var g = 0u; g < ng; g++) {
    let q0 = w4[wr[0] + g];
    let q1 = w4[wr[1] + g];
    let q2 = w4[wr[2] + g];
    let q3 = w4[wr[3] + g];
    // Initialised explicitly: SwiftShader kept the previous group's sums in a bare `var`.
    var part = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var j = 0u; j < 8u; j++) {
      let word = j / 2u;
      let s = 4u * (j % 2u);
      let c0 = nibbles(q0[word], s);
      let c1 = nibbles(q1[word], s);
      let c2 = nibbles(q2[word], s);
      let c3 = nibbles(q3[word], s);
      for (var a = 0u; a < 4u; a++) {
        let xv = x4[xr[a] + 8u * g + j];
        part[a] += vec4<f32>(dot(xv, c0), dot(xv, c1), dot(xv, c2), dot(xv, c3));
      }
    }
    let sc = vec4<f32>(scaleQ4(wr[0], ng, g), scaleQ4(wr[1], ng, g), scaleQ4(wr[2], ng, g), scaleQ4(wr[3], ng, g));
    for (var a = 0u; a < 4u; a++) { acc[a] += part[a] * sc; }
  }
  return acc;
}

// Barrier-free register tiling: each thread computes a 4x4 block of Y from vec4 loads
// (cols % 4 == 0, checked when the kernels load), a workgroup a 32x32 tile. Workgroup
// barriers are very costly on CPU implementations (SwiftShader runs every invocation of
// a workgroup as a coroutine), and on GPUs the 4x4 reuse keeps this memory-efficient.
@compute @workgroup_size(8, 8)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let i0 = wid.y * 32u + lid.y * 4u;   // first output row (row of X)
  let r0 = wid.x * 32u + lid.x * 4u;   // first output column (row of W)
  if (i0 >= p.n || r0 >= p.rows) { return; }
  let c4 = p.cols / 4u;
  // vec4 words per row of W in its format.
  var stride = c4;
  if (WEIGHT_FORMAT == 1u) { stride = p.cols / 8u; }
  if (WEIGHT_FORMAT == 2u) { stride = p.cols / 32u + (p.cols + 255u) / 256u; }
  var xr: array<u32, 4>;
  var wr: array<u32, 4>;
  for (var a = 0u; a < 4u; a++) {
    xr[a] = p.xOff / 4u + min(i0 + a, p.n - 1u) * c4;
    wr[a] = min(r0 + a, p.rows - 1u) * stride;
  }
  var acc: array<vec4<f32>, 4>;
  if (WEIGHT_FORMAT == 1u) { acc = tileF16(xr, wr); }
  else if (WEIGHT_FORMAT == 2u) { acc = tileQ4(xr, wr); }
  else { acc = tileF32(xr, wr); }
  for (var a = 0u; a < 4u; a++) {
    let i = i0 + a;
    if (i < p.n) {
      for (var b = 0u; b < 4u; b++) {
        if (r0 + b < p.rows) { store(i * p.rows + r0 + b, acc[a][b]); }
      }
    }
  }
}
