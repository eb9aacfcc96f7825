// Whisper-family audio encoder kernels (src/encoder/webgpu.ts; TS reference src/encoder/ops.ts).
// Activations are time-major [rows, width]. A batch holds whole attention windows back to
// back: mel window i occupies input rows [i·WIN_IN, …) and encoder window i the rows
// [i·WIN_OUT, …); only the batch's last window may be shorter. No workgroup barriers
// (they are unreliable or slow on CPU implementations of WebGPU). Each entry point has its
// own binding numbers (conv 0–5, layer_norm 10–14, linear 20–24, attention 30–34,
// avg_pool2 40–42) so one module holds them all; every pipeline gets every constant, and
// these are the ones that matter:
//   conv_k3: CIN, COUT, STRIDE, POS (bool: add positions restarting per window)
//   layer_norm: D, EPS
//   linear: BIAS, GELU, ACC (bools), WEIGHT_FORMAT (0 f32, 1 f16, 2 q4: src/model/quant.ts)
//   attention: D, HD, SCALE
//   avg_pool2: D

struct Dims { a: u32, b: u32, c: u32, d: u32 }

fn gelu(x: f32) -> f32 { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }

// erf for f32 (WGSL has none): erf(a) = 2/√π·e^{-a²}·Σ 2ⁿa^{2n+1}/(2n+1)!!, a series of
// positive terms (no cancellation) that holds f32 rounding up to a = 4, where erf rounds
// to 1 in f32 (erfc(4) ≈ 1.5e-8). Abramowitz–Stegun 7.1.26 would be 1.5e-7 off absolutely.
fn erf(x: f32) -> f32 {
  let a = abs(x);
  var r = 1.0;
  if (a < 4.0) {
    let a2 = a * a;
    var term = a;
    var sum = a;
    for (var n = 1u; n < 64u; n++) {
      term *= 2.0 * a2 / f32(2u * n + 1u);
      sum += term;
      if (term < 1e-8 * sum) { break; }
    }
    r = 1.1283791670955126 * exp(-a2) * sum;
  }
  return select(r, -r, x < 0.0);
}

// ---------------------------------------------------------------- conv (k 3, pad 1) + GELU
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

// ---------------------------------------------------------------- LayerNorm (with bias)
// One thread per row. Params: a = rows.
@group(0) @binding(10) var<storage, read> nx: array<f32>;
@group(0) @binding(11) var<storage, read> ng: array<f32>;
@group(0) @binding(12) var<storage, read> nb: array<f32>;
@group(0) @binding(13) var<storage, read_write> ny: array<f32>;
@group(0) @binding(14) var<uniform> np: Dims;

@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * 65535u) * 64u + lid;
  if (row >= np.a) { return; }
  let base = row * D;
  var mean = 0.0;
  for (var c = 0u; c < D; c++) { mean += nx[base + c]; }
  mean /= f32(D);
  var v = 0.0;
  for (var c = 0u; c < D; c++) { let t = nx[base + c] - mean; v += t * t; }
  let inv = 1.0 / sqrt(v / f32(D) + EPS);
  for (var c = 0u; c < D; c++) { ny[base + c] = (nx[base + c] - mean) * inv * ng[c] + nb[c]; }
}

// ---------------------------------------------------------------- Linear (PyTorch [out, in])
// Y[n, out] (=, or += with ACC) act(X[n, in]·Wᵀ + b): one thread per 4 rows × 4 outputs.
// W is bound as u32 words in the weight formats of src/model/quant.ts (WEIGHT_FORMAT 0 f32
// bits, 1 two f16 per word, 2 q4: 32-weight groups of codes, then the row's f16 scales).
// Params: a = out (multiple of 4), b = in (multiple of 4, 8, 32 per format), c = n.
@group(0) @binding(20) var<storage, read> lw: array<vec4<u32>>;
@group(0) @binding(21) var<storage, read> lx: array<vec4<f32>>;
@group(0) @binding(22) var<storage, read> lb: array<f32>;
@group(0) @binding(23) var<storage, read_write> ly: array<f32>;
@group(0) @binding(24) var<uniform> lp: Dims;

fn lo16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)); }
fn hi16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)); }

// Codes 4s .. 4s+3 of a q4 word, as code − 8.
fn nib(v: u32, s: u32) -> vec4<f32> {
  let q = (vec4<u32>(v) >> vec4<u32>(4u * s, 4u * s + 4u, 4u * s + 8u, 4u * s + 12u)) & vec4<u32>(15u);
  return vec4<f32>(q) - vec4<f32>(8.0);
}

fn q4scale(rowBase: u32, ng: u32, g: u32) -> f32 {
  return unpack2x16float(lw[rowBase + ng + g / 8u][(g / 2u) % 4u])[g % 2u];
}

// The 4 × 4 block of sums for X rows xr (vec4 indices) and W rows wr (word-vec4 indices).
fn tile(xr: array<u32, 4>, wr: array<u32, 4>) -> array<vec4<f32>, 4> {
  var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  if (WEIGHT_FORMAT == 0u) {
    for (var k = 0u; k < lp.b / 4u; k++) {
      let w0 = bitcast<vec4<f32>>(lw[wr[0] + k]);
      let w1 = bitcast<vec4<f32>>(lw[wr[1] + k]);
      let w2 = bitcast<vec4<f32>>(lw[wr[2] + k]);
      let w3 = bitcast<vec4<f32>>(lw[wr[3] + k]);
      for (var a = 0u; a < 4u; a++) {
        let xv = lx[xr[a] + k];
        acc[a] += vec4<f32>(dot(xv, w0), dot(xv, w1), dot(xv, w2), dot(xv, w3));
      }
    }
  } else if (WEIGHT_FORMAT == 1u) {
    for (var k = 0u; k < lp.b / 8u; k++) {
      let v0 = lw[wr[0] + k]; let v1 = lw[wr[1] + k]; let v2 = lw[wr[2] + k]; let v3 = lw[wr[3] + k];
      for (var a = 0u; a < 4u; a++) {
        let xa = lx[xr[a] + 2u * k];
        let xb = lx[xr[a] + 2u * k + 1u];
        acc[a] += vec4<f32>(dot(xa, lo16(v0)) + dot(xb, hi16(v0)), dot(xa, lo16(v1)) + dot(xb, hi16(v1)),
                            dot(xa, lo16(v2)) + dot(xb, hi16(v2)), dot(xa, lo16(v3)) + dot(xb, hi16(v3)));
      }
    }
  } else {
    let ng = lp.b / 32u;
    for (var g = 0u; g < ng; g++) {
      let q0 = lw[wr[0] + g]; let q1 = lw[wr[1] + g]; let q2 = lw[wr[2] + g]; let q3 = lw[wr[3] + g];
      var part = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
      for (var j = 0u; j < 8u; j++) {
        let word = j / 2u;
        let s = 4u * (j % 2u);
        let c0 = nib(q0[word], s); let c1 = nib(q1[word], s); let c2 = nib(q2[word], s); let c3 = nib(q3[word], s);
        for (var a = 0u; a < 4u; a++) {
          let xv = lx[xr[a] + 8u * g + j];
          part[a] += vec4<f32>(dot(xv, c0), dot(xv, c1), dot(xv, c2), dot(xv, c3));
        }
      }
      let sc = vec4<f32>(q4scale(wr[0], ng, g), q4scale(wr[1], ng, g), q4scale(wr[2], ng, g), q4scale(wr[3], ng, g));
      for (var a = 0u; a < 4u; a++) { acc[a] += part[a] * sc; }
    }
  }
  return acc;
}

@compute @workgroup_size(64)
fn linear(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o0 = (wid.x * 64u + lid) * 4u;
  let r0 = (wid.y + wid.z * 65535u) * 4u;
  if (o0 >= lp.a || r0 >= lp.c) { return; }
  var stride = lp.b / 4u;
  if (WEIGHT_FORMAT == 1u) { stride = lp.b / 8u; }
  if (WEIGHT_FORMAT == 2u) { stride = lp.b / 32u + (lp.b + 255u) / 256u; }
  var xr: array<u32, 4>;
  var wr: array<u32, 4>;
  for (var a = 0u; a < 4u; a++) {
    xr[a] = min(r0 + a, lp.c - 1u) * (lp.b / 4u);
    wr[a] = (o0 + a) * stride;
  }
  let acc = tile(xr, wr);
  for (var a = 0u; a < 4u; a++) {
    let r = r0 + a;
    if (r >= lp.c) { break; }
    for (var i = 0u; i < 4u; i++) {
      var v = acc[a][i];
      if (BIAS) { v += lb[o0 + i]; }
      if (GELU) { v = gelu(v); }
      let at = r * lp.a + o0 + i;
      if (ACC) { ly[at] += v; } else { ly[at] = v; }
    }
  }
}

// ---------------------------------------------------------------- windowed attention
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

// ---------------------------------------------------------------- AvgPool1d(2)
// y[r, c] = (x[2r, c] + x[2r+1, c]) / 2. Params: a = output rows.
@group(0) @binding(40) var<storage, read> px: array<f32>;
@group(0) @binding(41) var<storage, read_write> py: array<f32>;
@group(0) @binding(42) var<uniform> pp: Dims;

@compute @workgroup_size(64)
fn avg_pool2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * 65535u) * 64u + lid;
  if (i >= pp.a * D) { return; }
  let r = i / D;
  let c = i % D;
  py[i] = 0.5 * (px[2u * r * D + c] + px[(2u * r + 1u) * D + c]);
}
