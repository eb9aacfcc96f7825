// Decode products with a PyTorch-layout weight W [rows, cols] (one token: x is a vector):
//   matvec:        y[r] = W[r,:] . x
//   matvec_swiglu: y[r] = silu(Wg[r,:].x) * (Wu[r,:].x), W = [gate; up] of 2*rows rows
// One thread per output row with vec4 loads (cols % 4 == 0), no workgroup barriers:
// barriers dominate on CPU implementations (SwiftShader runs a workgroup's invocations
// as coroutines), and a row per thread keeps a GPU's loads within cached lines.
// ACC (bool) turns "=" into "+=": the residual add fused into o_proj and down_proj.
// WEIGHT_FORMAT (src/model/quant.ts) picks how W's words are read: 0 f32 bits,
// 1 f16 pairs (cols % 8 == 0), 2 q4 (cols % 32 == 0): per row the 4-bit codes, 4 words
// per 32-weight group, then the groups' f16 scales two per word, padded to vec4s.
// Every format binds W as vec4<u32> words; f32 bitcasts them back, exactly.
// A matrix larger than one binding runs as one dispatch per row part, each writing its
// slice of y through a binding offset.
// Constants: ACC, WEIGHT_FORMAT.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32 }

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn store(i: u32, v: f32) {
  if (ACC) { y[i] += v; } else { y[i] = v; }
}

fn rowDotF32(row: u32) -> f32 {
  let c4 = p.cols / 4u;
  let wb = row * c4;
  let xb = p.xOff / 4u;
  var acc = vec4<f32>(0.0);
  for (var c = 0u; c < c4; c++) { acc += bitcast<vec4<f32>>(w[wb + c]) * x[xb + c]; }
  return (acc.x + acc.y) + (acc.z + acc.w);
}

fn rowDotF16(row: u32) -> f32 {
  let c8 = p.cols / 8u;
  let wb = row * c8;
  let xb = p.xOff / 4u;
  var acc = vec4<f32>(0.0);
  for (var c = 0u; c < c8; c++) {
    let v = w[wb + c];
    acc += vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)) * x[xb + 2u * c];
    acc += vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)) * x[xb + 2u * c + 1u];
  }
  return (acc.x + acc.y) + (acc.z + acc.w);
}

// Codes 4s .. 4s+3 of a word (s = 0: elements 0-3, s = 4: elements 4-7), as code - 8.
fn nibbles(v: u32, s: u32) -> vec4<f32> {
  let q = (vec4<u32>(v) >> vec4<u32>(4u * s, 4u * s + 4u, 4u * s + 8u, 4u * s + 12u)) & vec4<u32>(15u);
  return vec4<f32>(q) - vec4<f32>(8.0);
}

// The integer codes meet x first; each group's sum is scaled once.
fn rowDotQ4(row: u32) -> f32 {
  let ng = p.cols / 32u;
  let wb = row * (ng + (p.cols + 255u) / 256u);
  let xb = p.xOff / 4u;
  var acc = 0.0;
  for (var g = 0u; g < ng; g++) {
    let q = w[wb + g];
    let s = unpack2x16float(w[wb + ng + g / 8u][(g / 2u) % 4u])[g % 2u];
    let xg = xb + 8u * g;
    var d = nibbles(q.x, 0u) * x[xg] + nibbles(q.x, 4u) * x[xg + 1u];
    d += nibbles(q.y, 0u) * x[xg + 2u] + nibbles(q.y, 4u) * x[xg + 3u];
    d += nibbles(q.z, 0u) * x[xg + 4u] + nibbles(q.z, 4u) * x[xg + 5u];
    d += nibbles(q.w, 0u) * x[xg + 6u] + nibbles(q.w, 4u) * x[xg + 7u];
    acc += s * ((d.x + d.y) + (d.z + d.w));
  }
  return acc;
}

fn rowDot(row: u32) -> f32 {
  if (WEIGHT_FORMAT == 1u) { return rowDotF16(row); }
  if (WEIGHT_FORMAT == 2u) { return rowDotQ4(row); }
  return rowDotF32(row);
}

// Rows can exceed 65,535 workgroups of 64 (large vocabularies): 2D grid.
@compute @workgroup_size(64)
fn matvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (r >= p.rows) { return; }
  store(r, rowDot(r));
}

@compute @workgroup_size(64)
fn matvec_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (r >= p.rows) { return; }
  let g = rowDot(r);
  let u = rowDot(r + p.rows);
  store(r, g / (1.0 + exp(-g)) * u);
}
