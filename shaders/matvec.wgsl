// Decode products with a PyTorch-layout weight W [rows, cols] (one token: x is a vector):
//   matvec:        y[r] = W[r,:] . x
//   matvec_swiglu: y[r] = silu(Wg[r,:].x) * (Wu[r,:].x), W = [gate; up] of 2*rows rows
// One thread per output row with vec4 loads (cols % 4 == 0), no workgroup barriers:
// barriers dominate on CPU implementations (SwiftShader runs a workgroup's invocations
// as coroutines), and a row per thread keeps a GPU's loads within cached lines.
// ACC (bool) turns "=" into "+=": the residual add fused into o_proj and down_proj.
// Constants: ACC.

struct Params { rows: u32, cols: u32, n: u32, xOff: u32 }

@group(0) @binding(0) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn store(i: u32, v: f32) {
  if (ACC) { y[i] += v; } else { y[i] = v; }
}

fn rowDot(row: u32) -> f32 {
  let c4 = p.cols / 4u;
  let wb = row * c4;
  let xb = p.xOff / 4u;
  var acc = vec4<f32>(0.0);
  for (var c = 0u; c < c4; c++) { acc += w[wb + c] * x[xb + c]; }
  return (acc.x + acc.y) + (acc.z + acc.w);
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
