// Decode products with a PyTorch-layout weight W [rows, cols] (one token: x is a vector):
//   matvec:        y[r] = W[r,:] . x
//   matvec_swiglu: y[r] = silu(Wg[r,:].x) * (Wu[r,:].x), W = [gate; up] of 2*rows rows
// One thread per output row with vec4 loads (cols % 4 == 0), no workgroup barriers:
// barriers dominate on CPU implementations (SwiftShader runs a workgroup's invocations
// as coroutines), and a row per thread keeps a GPU's loads within cached lines.
// Bindings, W's formats and ACC: product.wgsl.
// A matrix larger than one binding runs as one dispatch per row part, each writing its
// slice of y through a binding offset.
// Constants: ACC, WEIGHT_FORMAT.

//#include product.wgsl

// Rows can exceed 65,535 workgroups of 64 (large vocabularies): 2D grid.
@compute @workgroup_size(64)
fn matvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (r >= p.rows) { return; }
  store(r, rowDot(r, p.xOff / 4u, p.cols));
}

@compute @workgroup_size(64)
fn matvec_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (r >= p.rows) { return; }
  let g = rowDot(r, p.xOff / 4u, p.cols);
  let u = rowDot(r + p.rows, p.xOff / 4u, p.cols);
  store(r, g / (1.0 + exp(-g)) * u);
}
