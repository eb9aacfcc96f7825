// Whisper-family audio encoder: conv (kernel 3, padding 1) + GELU.
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Constants: CIN, COUT, STRIDE, POS (bool: add positions restarting per window);
// every encoder pipeline gets every encoder constant (encoderConstants).

//#include encoder_io.wgsl
//#include gelu.wgsl

// A batch holds whole attention windows back to back: mel window i occupies input rows
// [i·WIN_IN, …) and encoder window i the rows [i·WIN_OUT, …); only the batch's last window
// may be shorter.
// y[r, o] = GELU(b[o] + Σ_k Σ_c w[o, k, c]·x[src, c]) (+ pos[j, o]), src = window start +
// j·STRIDE + k − 1 with j the row's index in its window; sources outside the window (or the
// batch) are the zero padding. in0 = x, in1 = w, in2 = b, in3 = pos, dst = y.
// Params: a = inRows, b = outRows, c = WIN_IN, d = WIN_OUT.
@compute @workgroup_size(64)
fn conv_k3(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = wid.x * 64u + lid;
  let r = wid.y + wid.z * 65535u;
  if (o >= COUT || r >= dims.b) { return; }
  let win = r / dims.d;
  let j = r % dims.d;
  let w0 = win * dims.c;
  let wEnd = min(w0 + dims.c, dims.a);
  var acc = in2[o];
  for (var k = 0u; k < 3u; k++) {
    let s = i32(w0 + j * STRIDE + k) - 1;
    if (s < i32(w0) || s >= i32(wEnd)) { continue; }
    let xb = u32(s) * CIN;
    let wb = (o * 3u + k) * CIN;
    for (var c = 0u; c < CIN; c++) { acc += in1[wb + c] * in0[xb + c]; }
  }
  var v = gelu(acc);
  if (POS) { v += in3[j * COUT + o]; }
  dst[r * COUT + o] = v;
}
