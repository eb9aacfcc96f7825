// Whisper-family audio encoder: windowed attention.
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Constants: D, HD, SCALE;
// every encoder pipeline gets every encoder constant (encoderConstants).

//#include encoder_io.wgsl

// out[r, h] = softmax_j(SCALE·q[r, h]·k[j, h]) v[j, h] over the keys j of r's window, the
// first `keys` of them (Qwen2-Audio masks padding frames as keys). One thread per
// (row, head), online softmax. in0 = q, in1 = k, in2 = v, dst = out.
// Params: a = rows, b = window rows, c = keys per window.
@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.z * 65535u) * 64u + lid;
  let h = wid.y;
  if (r >= dims.a) { return; }
  let w0 = (r / dims.b) * dims.b;
  let wEnd = min(min(w0 + dims.b, w0 + dims.c), dims.a);
  let qb = r * D + h * HD;
  var q: array<f32, HD>;
  for (var c = 0u; c < HD; c++) { q[c] = in0[qb + c] * SCALE; }
  var acc: array<f32, HD>;
  var m = -3.0e38;
  var l = 0.0;
  for (var j = w0; j < wEnd; j++) {
    let kb = j * D + h * HD;
    var s = 0.0;
    for (var c = 0u; c < HD; c++) { s += q[c] * in1[kb + c]; }
    let mNew = max(m, s);
    let corr = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * corr + p;
    for (var c = 0u; c < HD; c++) { acc[c] = acc[c] * corr + p * in2[kb + c]; }
    m = mNew;
  }
  for (var c = 0u; c < HD; c++) { dst[qb + c] = acc[c] / l; }
}
