// Head triage on the GPU (src/backend/webgpu/triage.ts; the plain-TS reference is
// src/calibrate/direct-sensitivity.ts): the Voice Score's audio attention of the answer
// rows and the direct-path Head Sensitivity, from a teacher-forced prefill over
// [prefix][audio][instruction][answer]. T answer rows start at absolute row `first`; their
// queries and attention outputs (before the output projection) were copied out of the
// prefill's blocks into [T, QD] buffers, and the prefill's (max, sum) per row and head and
// the layer's K/V are read where the prefill left them.
//   answer_attention: a [T, H, audioLength], the softmax weight of each audio position.
//   logit_grad:       one answer row's softmax minus its one-hot target, over the vocabulary,
//                     into its row of dl [T, VOCAB], and its CE.
//   norm_grad:        back through the final RMSNorm: r = ∂CE/∂x of one answer row, from its
//                     row of gy = dl W_U [T, D].
//   head_sensitivity: per (answer row, KV head) the mean over audio positions of
//                     ‖Σ_h a_h,τ ((v_τ − o_h)·δ_h) / √d · q_h‖ (δ = W_Oᵀ r).
// Constants: H, HKV, HD, GROUP, QD, KVD, D, VOCAB, SCALE, EPS, KV_F16.

const HD4: u32 = HD / 4u;
const KVD4: u32 = KVD / 4u;

struct Params { first: u32, rows: u32, audioStart: u32, audioLength: u32, row: u32, tgt: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;          // [T, QD] answer rows' queries
@group(0) @binding(2) var<storage, read> kvWords: array<vec2<u32>>; // a layer's K or V [n, KVD], pool precision
@group(0) @binding(3) var<storage, read> ml: array<f32>;         // [n, H, 2] of the prefill
@group(0) @binding(4) var<storage, read_write> a: array<f32>;    // [T, H, audioLength]
@group(0) @binding(5) var<storage, read> vecIn: array<f32>;      // one row's logits [VOCAB] / gy [T, D]
@group(0) @binding(6) var<storage, read_write> vecOut: array<f32>; // dl [T, VOCAB] / r [T, D]
@group(0) @binding(7) var<storage, read_write> ce: array<f32>;   // [T]
@group(0) @binding(8) var<storage, read> hidden: array<f32>;     // final hidden states [n, D]
@group(0) @binding(9) var<storage, read> normW: array<f32>;      // [D]
@group(0) @binding(10) var<storage, read> o: array<f32>;         // [T, QD] attention outputs
@group(0) @binding(11) var<storage, read> delta: array<f32>;     // [T, QD] W_Oᵀ r
@group(0) @binding(12) var<storage, read> aIn: array<f32>;       // answer_attention's a
@group(0) @binding(13) var<storage, read_write> hs: array<f32>;  // [T, HKV]

fn unpack4(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// Dims 4g..4g+3 of the K or V rows, g counted in fours across [n, KVD].
fn kv4(g: u32) -> vec4<f32> {
  if (KV_F16) { return unpack4(kvWords[g]); }
  return bitcast<vec4<f32>>(vec4<u32>(kvWords[2u * g], kvWords[2u * g + 1u]));
}

// Grid (audio positions / 64, T · H); kvWords: the layer's K.
@compute @workgroup_size(64)
fn answer_attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tau = wid.x * 64u + lid;
  if (tau >= p.audioLength) { return; }
  let t = wid.y / H;
  let h = wid.y % H;
  let i = p.first + t;
  let kb = (p.audioStart + tau) * KVD4 + (h / GROUP) * HD4;
  var dot = 0.0;
  for (var d = 0u; d < HD4; d++) {
    let qv = vec4<f32>(q[t * QD + h * HD + 4u * d], q[t * QD + h * HD + 4u * d + 1u],
                       q[t * QD + h * HD + 4u * d + 2u], q[t * QD + h * HD + 4u * d + 3u]);
    let kv = kv4(kb + d);
    dot += (qv.x * kv.x + qv.y * kv.y) + (qv.z * kv.z + qv.w * kv.w);
  }
  let m = ml[(i * H + h) * 2u];
  let l = ml[(i * H + h) * 2u + 1u];
  a[(t * H + h) * p.audioLength + tau] = exp(dot * SCALE - m) / l;
}

var<workgroup> red: array<f32, 256>;

fn reduceMax(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduceSum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// One workgroup: vecIn holds the row's logits; its dl row into vecOut, the CE into ce[row].
@compute @workgroup_size(256)
fn logit_grad(@builtin(local_invocation_index) lid: u32) {
  var m = -3.0e38;
  for (var c = lid; c < VOCAB; c += 256u) { m = max(m, vecIn[c]); }
  m = reduceMax(lid, m);
  var s = 0.0;
  for (var c = lid; c < VOCAB; c += 256u) { s += exp(vecIn[c] - m); }
  s = reduceSum(lid, s);
  for (var c = lid; c < VOCAB; c += 256u) {
    var g = exp(vecIn[c] - m) / s;
    if (c == p.tgt) { g -= 1.0; }
    vecOut[p.row * VOCAB + c] = g;
  }
  if (lid == 0u) { ce[p.row] = m + log(s) - vecIn[p.tgt]; }
}

// One workgroup: answer row p.row, whose hidden state is row first + row and whose gy is
// vecIn's row; y = w ⊙ x / rms(x) gives ∂y_i/∂x_j = w_i (δ_ij / rms − x_i x_j / (D rms³)).
@compute @workgroup_size(256)
fn norm_grad(@builtin(local_invocation_index) lid: u32) {
  let xb = (p.first + p.row) * D;
  var ss = 0.0;
  var dt = 0.0;
  for (var d = lid; d < D; d += 256u) {
    let x = hidden[xb + d];
    ss += x * x;
    dt += normW[d] * vecIn[p.row * D + d] * x;
  }
  ss = reduceSum(lid, ss);
  dt = reduceSum(lid, dt);
  let rms = sqrt(ss / f32(D) + EPS);
  for (var d = lid; d < D; d += 256u) {
    vecOut[p.row * D + d] = normW[d] * vecIn[p.row * D + d] / rms - hidden[xb + d] * dt / (f32(D) * rms * rms * rms);
  }
}

// Grid (T, HKV), 64 threads over the audio positions; kvWords: the layer's V.
@compute @workgroup_size(64)
fn head_sensitivity(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let kh = wid.y;
  var oDelta: array<f32, GROUP>;
  for (var j = 0u; j < GROUP; j++) {
    let b = t * QD + (kh * GROUP + j) * HD;
    var s = 0.0;
    for (var d = 0u; d < HD; d++) { s += o[b + d] * delta[b + d]; }
    oDelta[j] = s;
  }
  var norms = 0.0;
  for (var tau = lid; tau < p.audioLength; tau += 64u) {
    var g: array<f32, HD>;
    for (var d = 0u; d < HD; d++) { g[d] = 0.0; }
    let vb = (p.audioStart + tau) * KVD4 + kh * HD4;
    for (var j = 0u; j < GROUP; j++) {
      let h = kh * GROUP + j;
      let b = t * QD + h * HD;
      var vDelta = 0.0;
      for (var d = 0u; d < HD4; d++) {
        let v = kv4(vb + d);
        vDelta += (v.x * delta[b + 4u * d] + v.y * delta[b + 4u * d + 1u]) +
                  (v.z * delta[b + 4u * d + 2u] + v.w * delta[b + 4u * d + 3u]);
      }
      let coef = aIn[(t * H + h) * p.audioLength + tau] * (vDelta - oDelta[j]) * SCALE;
      for (var d = 0u; d < HD; d++) { g[d] += coef * q[b + d]; }
    }
    var n2 = 0.0;
    for (var d = 0u; d < HD; d++) { n2 += g[d] * g[d]; }
    norms += sqrt(n2);
  }
  red[lid] = norms;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) { hs[t * HKV + kh] = red[0] / f32(p.audioLength); }
}
