// SwiGLU of prefill rows: act[i, c] = silu(gu[i, c]) * gu[i, I + c], where gu = X [gate; up]^T
// comes from one matmul over the concatenated gate and up weights.
// Constants: INTER.

struct Params { n: u32, _p0: u32, _p1: u32, _p2: u32 }

@group(0) @binding(0) var<storage, read> gu: array<f32>;       // [n, 2 * INTER]
@group(0) @binding(1) var<storage, read_write> act: array<f32>; // [n, INTER]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (t >= p.n * INTER) { return; }
  let i = t / INTER;
  let c = t % INTER;
  let g = gu[i * 2u * INTER + c];
  act[t] = g / (1.0 + exp(-g)) * gu[i * 2u * INTER + INTER + c];
}
