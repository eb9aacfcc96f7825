// Prefill product with a PyTorch-layout weight W [rows, cols]: Y[n, rows] = X[n, cols] W^T.
// Bindings, W's formats and ACC: product.wgsl.
// Constants: ACC, WEIGHT_FORMAT.

//#include product.wgsl

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
  let stride = rowWords(p.cols);
  var xr: array<u32, 4>;
  var wr: array<u32, 4>;
  for (var a = 0u; a < 4u; a++) {
    xr[a] = p.xOff / 4u + min(i0 + a, p.n - 1u) * c4;
    wr[a] = min(r0 + a, p.rows - 1u) * stride;
  }
  let acc = tile(xr, wr, p.cols);
  for (var a = 0u; a < 4u; a++) {
    let i = i0 + a;
    if (i < p.n) {
      for (var b = 0u; b < 4u; b++) {
        if (r0 + b < p.rows) { store(i * p.rows + r0 + b, acc[a][b]); }
      }
    }
  }
}
