// Whisper-family audio encoder: windowed attention.
// src/encoder/webgpu-kernels.ts loads it; src/encoder/ops.ts is its TS reference.
// Activations are time-major [rows, width]; no workgroup barriers (unreliable or slow on
// CPU implementations of WebGPU). The binding numbers are the ones EncoderPass binds,
// distinct across the encoder's kernels.
// Constants: D, HD, SCALE;
// every encoder pipeline gets every encoder constant (encoderConstants).

struct Dims { a: u32, b: u32, c: u32, d: u32 }

// out[r, h] = softmax_j(SCALE·q[r, h]·k[j, h]) v[j, h] over the keys j of r's window, the
// first `keys` of them (Qwen2-Audio masks padding frames as keys). One thread per
// (row, head), online softmax. Params: a = rows, b = window rows, c = keys per window.
@group(0) @binding(30) var<storage, read> aq: array<f32>;
@group(0) @binding(31) var<storage, read> ak: array<f32>;
@group(0) @binding(32) var<storage, read> av: array<f32>;
@group(0) @binding(33) var<storage, read_write> ao: array<f32>;
@group(0) @binding(34) var<uniform> ap: Dims;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = (wid.x + wid.z * 65535u) * 64u + lid;
  let h = wid.y;
  if (r >= ap.a) { return; }
  let w0 = (r / ap.b) * ap.b;
  let wEnd = min(min(w0 + ap.b, w0 + ap.c), ap.a);
  let qb = r * D + h * HD;
  var q: array<f32, HD>;
  for (var c = 0u; c < HD; c++) { q[c] = aq[qb + c] * SCALE; }
  var acc: array<f32, HD>;
  var m = -3.0e38;
  var l = 0.0;
  for (var j = w0; j < wEnd; j++) {
    let kb = j * D + h * HD;
    var s = 0.0;
    for (var c = 0u; c < HD; c++) { s += q[c] * ak[kb + c]; }
    let mNew = max(m, s);
    let corr = exp(m - mNew);
    let p = exp(s - mNew);
    l = l * corr + p;
    for (var c = 0u; c < HD; c++) { acc[c] = acc[c] * corr + p * av[kb + c]; }
    m = mNew;
  }
  for (var c = 0u; c < HD; c++) { ao[qb + c] = acc[c] / l; }
}
