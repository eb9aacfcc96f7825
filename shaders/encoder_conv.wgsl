// Whisper-family audio encoder: conv (kernel 3, padding 1) + GELU.
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Activations are time-major [rows, width]; no workgroup barriers (unreliable or slow on
// CPU implementations of WebGPU). The binding numbers are the ones EncoderPass binds,
// distinct across the encoder's kernels.
// Constants: CIN, COUT, STRIDE, POS (bool: add positions restarting per window);
// every encoder pipeline gets every encoder constant (encoderConstants).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

// A batch holds whole attention windows back to back: mel window i occupies input rows
// [i·WIN_IN, …) and encoder window i the rows [i·WIN_OUT, …); only the batch's last window
// may be shorter.
// y[r, o] = GELU(b[o] + Σ_k Σ_c w[o, k, c]·x[src, c]) (+ pos[j, o]), src = window start +
// j·STRIDE + k − 1 with j the row's index in its window; sources outside the window (or the
// batch) are the zero padding. Params: a = inRows, b = outRows, c = WIN_IN, d = WIN_OUT.
@group(0) @binding(0) var<storage, read> cx: array<f32>;
@group(0) @binding(1) var<storage, read> cw: array<f32>;
@group(0) @binding(2) var<storage, read> cb: array<f32>;
@group(0) @binding(3) var<storage, read> cpos: array<f32>;
@group(0) @binding(4) var<storage, read_write> cy: array<f32>;
@group(0) @binding(5) var<uniform> cp: Dims;

@compute @workgroup_size(64)
fn conv_k3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = wid.x * 64u + lid;
  let r = wid.y + wid.z * 65535u;
  if (o >= COUT || r >= cp.b) { return; }
  let win = r / cp.d;
  let j = r % cp.d;
  let w0 = win * cp.c;
  let wEnd = min(w0 + cp.c, cp.a);
  var acc = cb[o];
  for (var k = 0u; k < 3u; k++) {
    let s = i32(w0 + j * STRIDE + k) - 1;
    if (s < i32(w0) || s >= i32(wEnd)) { continue; }
    let xb = u32(s) * CIN;
    let wb = (o * 3u + k) * CIN;
    for (var c = 0u; c < CIN; c++) { acc += cw[wb + c] * cx[xb + c]; }
  }
  var v = gelu(acc);
  if (POS) { v += cpos[j * COUT + o]; }
  cy[r * COUT + o] = v;
}

//#include gelu.wgsl
