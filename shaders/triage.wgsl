// Head triage on the GPU (src/backend/webgpu/triage.ts; the plain-TS reference is
// src/calibrate/answer-path.ts): the Voice Score's audio attention of the answer rows and the
// answer-path Head Sensitivity, from one teacher-forced prefill over
// [prefix][audio][instruction][answer] and a backward of the T answer rows alone, layer by
// layer downwards. The answer rows start at absolute row `first`; per layer their inputs,
// post-RoPE queries and attention outputs (before the output projection), and the layer's
// K and V over all n rows, were copied out of the prefill.
//   logit_grad:       one answer row's softmax minus its one-hot target, over the vocabulary,
//                     into its row of dl [T, VOCAB], and its CE.
//   norm_grad:        per answer row, back through an RMSNorm y = w ⊙ x / rms(x): out (+)= the
//                     gradient at x from gy's row (acc: added to what out holds).
//   swiglu_grad:      per answer row, back through act = silu(gate) · up: [dgate | dup].
//   query_grad:       per (answer row, query head), the softmax over every key the row sees:
//                     the audio attention a, and coef_j = P_j (v_j·δ − o·δ) / √d, the score
//                     gradient (δ = W_Oᵀ r, the gradient at the head's attention output).
//   query_back:       dq = Σ_j coef_j k_j, rotated back by RoPE (the transpose of the rotation),
//                     into the query columns of dqkv [T, QD + 2 KVD].
//   head_sensitivity: per (answer row, KV head) the mean over audio positions of
//                     ‖Σ_h a_h,τ ((v_τ − o_h)·δ_h) / √d · q_h‖, the key gradient's norm.
// Constants: H, HKV, HD, HALF, GROUP, QD, KVD, D, INTER, VOCAB, SCALE, EPS, KV_F16.

const HD4: u32 = HD / 4u;
const KVD4: u32 = KVD / 4u;

struct Params { first: u32, rows: u32, audioStart: u32, audioLength: u32, row: u32, tgt: u32, acc: u32, n: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;          // [T, QD] answer rows' queries
@group(0) @binding(2) var<storage, read> kWords: array<vec2<u32>>; // a layer's K [n, KVD], pool precision
@group(0) @binding(3) var<storage, read> vWords: array<vec2<u32>>; // a layer's V [n, KVD], pool precision
@group(0) @binding(4) var<storage, read_write> a: array<f32>;    // [T, H, audioLength]
@group(0) @binding(5) var<storage, read> vecIn: array<f32>;      // logits [VOCAB] / gy [T, D] / dact [T, INTER]
@group(0) @binding(6) var<storage, read_write> vecOut: array<f32>; // dl [T, VOCAB] / r [T, D] / dgu [T, 2 INTER]
@group(0) @binding(7) var<storage, read_write> ce: array<f32>;   // [T]
@group(0) @binding(8) var<storage, read> hidden: array<f32>;     // a norm's input rows (answer rows from `first`)
@group(0) @binding(9) var<storage, read> normW: array<f32>;      // [D]
@group(0) @binding(10) var<storage, read> o: array<f32>;         // [T, QD] attention outputs
@group(0) @binding(11) var<storage, read> delta: array<f32>;     // [T, QD] W_Oᵀ r
@group(0) @binding(12) var<storage, read> aIn: array<f32>;       // query_grad's a
@group(0) @binding(13) var<storage, read_write> hs: array<f32>;  // [T, HKV]
@group(0) @binding(14) var<storage, read_write> coef: array<f32>; // [T, H, n]
@group(0) @binding(15) var<storage, read> coefIn: array<f32>;    // query_grad's coef
@group(0) @binding(16) var<storage, read> rope: array<f32>;      // [positions, HALF, 2] cos, sin
@group(0) @binding(17) var<storage, read_write> dqkv: array<f32>; // [T, QD + 2 KVD]
@group(0) @binding(18) var<storage, read> gu: array<f32>;        // [T, 2 INTER] gate and up again

fn unpack4(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// Dims 4g..4g+3 of the K (or V) rows, g counted in fours across [n, KVD].
fn k4(g: u32) -> vec4<f32> {
  if (KV_F16) { return unpack4(kWords[g]); }
  return bitcast<vec4<f32>>(vec4<u32>(kWords[2u * g], kWords[2u * g + 1u]));
}

fn v4(g: u32) -> vec4<f32> {
  if (KV_F16) { return unpack4(vWords[g]); }
  return bitcast<vec4<f32>>(vec4<u32>(vWords[2u * g], vWords[2u * g + 1u]));
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

// Grid (T): answer row t, whose norm input is hidden's row first + t and whose gy is vecIn's
// row t; y = w ⊙ x / rms(x) gives ∂y_i/∂x_j = w_i (δ_ij / rms − x_i x_j / (D rms³)).
@compute @workgroup_size(256)
fn norm_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let xb = (p.first + t) * D;
  var ss = 0.0;
  var dt = 0.0;
  for (var d = lid; d < D; d += 256u) {
    let x = hidden[xb + d];
    ss += x * x;
    dt += normW[d] * vecIn[t * D + d] * x;
  }
  ss = reduceSum(lid, ss);
  dt = reduceSum(lid, dt);
  let rms = sqrt(ss / f32(D) + EPS);
  for (var d = lid; d < D; d += 256u) {
    let g = normW[d] * vecIn[t * D + d] / rms - hidden[xb + d] * dt / (f32(D) * rms * rms * rms);
    if (p.acc != 0u) { vecOut[t * D + d] += g; } else { vecOut[t * D + d] = g; }
  }
}

// One thread per (answer row, MLP column): vecIn is ∂/∂act [T, INTER], gu the row's gate and up.
@compute @workgroup_size(64)
fn swiglu_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let e = (wid.x + wid.y * nwg.x) * 64u + lid;
  if (e >= p.rows * INTER) { return; }
  let t = e / INTER;
  let c = e % INTER;
  let g = gu[t * 2u * INTER + c];
  let u = gu[t * 2u * INTER + INTER + c];
  let sg = 1.0 / (1.0 + exp(-g));
  let dm = vecIn[e];
  vecOut[t * 2u * INTER + c] = dm * u * sg * (1.0 + g * (1.0 - sg));
  vecOut[t * 2u * INTER + INTER + c] = dm * g * sg;
}

// v · δ: the value row starting at group vb (of four dims) against δ's head vector at b.
fn valueDelta(vb: u32, b: u32) -> f32 {
  var s = 0.0;
  for (var d = 0u; d < HD4; d++) {
    let v = v4(vb + d);
    s += (v.x * delta[b + 4u * d] + v.y * delta[b + 4u * d + 1u]) + (v.z * delta[b + 4u * d + 2u] + v.w * delta[b + 4u * d + 3u]);
  }
  return s;
}

fn score(qb: u32, j: u32, kh: u32) -> f32 {
  let kb = j * KVD4 + kh * HD4;
  var dot = 0.0;
  for (var d = 0u; d < HD4; d++) {
    let k = k4(kb + d);
    dot += (q[qb + 4u * d] * k.x + q[qb + 4u * d + 1u] * k.y) + (q[qb + 4u * d + 2u] * k.z + q[qb + 4u * d + 3u] * k.w);
  }
  return dot * SCALE;
}

// Grid (T, H): the row's softmax over keys 0..first + t, again from its query and the layer's K.
@compute @workgroup_size(256)
fn query_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let h = wid.y;
  let i = p.first + t;
  let kh = h / GROUP;
  let qb = t * QD + h * HD;
  var od = 0.0;
  for (var d = 0u; d < HD; d++) { od += o[qb + d] * delta[qb + d]; }
  var m = -3.0e38;
  for (var j = lid; j <= i; j += 256u) { m = max(m, score(qb, j, kh)); }
  m = reduceMax(lid, m);
  var s = 0.0;
  for (var j = lid; j <= i; j += 256u) { s += exp(score(qb, j, kh) - m); }
  s = reduceSum(lid, s);
  for (var j = lid; j <= i; j += 256u) {
    let pj = exp(score(qb, j, kh) - m) / s;
    if (j >= p.audioStart && j < p.audioStart + p.audioLength) {
      a[(t * H + h) * p.audioLength + j - p.audioStart] = pj;
    }
    coef[(t * H + h) * p.n + j] = pj * (valueDelta(j * KVD4 + kh * HD4, qb) - od) * SCALE;
  }
}

var<workgroup> dq: array<f32, HD>;

// Grid (T, H), one thread per head dim: dq = Σ_j coef_j k_j, then RoPE's transpose at the row's position.
@compute @workgroup_size(HD)
fn query_back(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let h = wid.y;
  let i = p.first + t;
  let kh = h / GROUP;
  let cb = (t * H + h) * p.n;
  let e = kh * HD + lid;
  var acc = 0.0;
  for (var j = 0u; j <= i; j++) { acc += coefIn[cb + j] * k4((j * KVD + e) / 4u)[e % 4u]; }
  dq[lid] = acc;
  workgroupBarrier();
  if (lid < HALF) {
    let rb = (i * HALF + lid) * 2u;
    let cs = rope[rb];
    let sn = rope[rb + 1u];
    let x0 = dq[lid];
    let x1 = dq[lid + HALF];
    let ob = t * (QD + 2u * KVD) + h * HD;
    dqkv[ob + lid] = x0 * cs + x1 * sn;
    dqkv[ob + lid + HALF] = x1 * cs - x0 * sn;
  }
}

// Grid (T, HKV), 64 threads over the audio positions.
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
      let cf = aIn[(t * H + h) * p.audioLength + tau] * (valueDelta(vb, b) - oDelta[j]) * SCALE;
      for (var d = 0u; d < HD; d++) { g[d] += cf * q[b + d]; }
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
