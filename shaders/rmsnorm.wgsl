// RMSNorm: y = x / sqrt(mean(x^2) + EPS) * w.
// The residual add is fused into the epilogue of the matmul that produces the update
// (ACC in matmul.wgsl), so the residual stream is never re-read just to add: this norm
// reads the already-updated stream. inRow0/outRow0 let the final norm read only the
// last prompt row.
// Constants: D, EPS.

struct Params { rows: u32, inRow0: u32, outRow0: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// One thread per row, no workgroup barriers (they dominate on CPU implementations);
// a row is only hiddenSize long, so the serial sum costs little on a GPU either.
@compute @workgroup_size(64)
fn rmsnorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x * 64u + lid;
  if (row >= p.rows) { return; }
  let xb = (p.inRow0 + row) * D;
  var ss = 0.0;
  for (var c = 0u; c < D; c++) {
    let v = x[xb + c];
    ss += v * v;
  }
  let inv = 1.0 / sqrt(ss / f32(D) + EPS);
  let yb = (p.outRow0 + row) * D;
  for (var c = 0u; c < D; c++) {
    y[yb + c] = x[xb + c] * inv * w[c];
  }
}
