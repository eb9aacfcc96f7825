// Causal prefill attention over the whole prompt (thousands of positions), flash-style:
// one thread per query row, 64 rows per workgroup, online softmax rescaled once per
// block of BK keys. The final (max, sum) of every (row, head) is kept so prefill_scores
// can recompute exact softmax weights.
//   causal_attention: out [rows, QD] from q [rows, QD] of prompt rows [row0, n) (a block
//                     of the prompt: only its queries are bound) and k/v [n, KVD], which
//                     hold every row up to n.
//   prefill_scores:   per KV head and audio position t: softmax weight summed over the
//                     group and over query rows >= firstQuery (WnW: the instruction rows;
//                     SnapKV: its window), as ops.causalAttention's scoresOut; each block
//                     adds its rows' share (the buffer starts cleared).
// Keys and values are read straight from storage: all rows of a workgroup read the same
// key at once, so a GPU serves it from cache, and there are no workgroup barriers, which
// dominate on CPU implementations (SwiftShader). vec4 loads need HD % 4 == 0.
// K/V hold the pool's precision (rope_split wrote them): four dims are two words of f32
// bits, or with KV_F16 one word pair of f16 halves; attention computes in f32 either way.
// Constants: H, HKV, HD, GROUP, QD, KVD, SCALE, BK, KV_F16.

const NEG: f32 = -3.0e38;
const HD4: u32 = HD / 4u;
const KVD4: u32 = KVD / 4u;

// head0 / kvHead0 offset the grid's head index (tests run a slice of the heads).
// n: the end of this block's rows (the keys it may see); row0: its first row.
struct Params { n: u32, audioStart: u32, audioLength: u32, firstQuery: u32, layer: u32, head0: u32, kvHead0: u32, row0: u32 }

@group(0) @binding(0) var<storage, read> q4: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> kWords: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> vWords: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> out4: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> ml: array<f32>;      // [n, H, 2]
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> scores: array<f32>;  // [layers * HKV, audioLength]
@group(0) @binding(7) var<storage, read> mlIn: array<f32>;

fn hsum(v: vec4<f32>) -> f32 {
  return (v.x + v.y) + (v.z + v.w);
}

fn unpack4(w: vec2<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// Dims 4g..4g+3 of the K (V) rows, g counted in fours across [n, KVD].
fn key4(g: u32) -> vec4<f32> {
  if (KV_F16) { return unpack4(kWords[g]); }
  return bitcast<vec4<f32>>(vec4<u32>(kWords[2u * g], kWords[2u * g + 1u]));
}

fn value4(g: u32) -> vec4<f32> {
  if (KV_F16) { return unpack4(vWords[g]); }
  return bitcast<vec4<f32>>(vec4<u32>(vWords[2u * g], vWords[2u * g + 1u]));
}

@compute @workgroup_size(64)
fn causal_attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y + p.head0;
  let kb = (h / GROUP) * HD4;
  let i = p.row0 + wid.x * 64u + lid;
  if (i >= p.n) { return; }
  var qv: array<vec4<f32>, HD4>;
  var acc: array<vec4<f32>, HD4>;
  var sb: array<f32, BK>;
  let qb = ((i - p.row0) * QD + h * HD) / 4u;
  for (var d = 0u; d < HD4; d++) {
    qv[d] = q4[qb + d];
    acc[d] = vec4<f32>(0.0);
  }
  var m = NEG;
  var l = 0.0;
  for (var t0 = 0u; t0 <= i; t0 += BK) {
    let cnt = min(BK, i + 1u - t0);
    var bm = m;
    for (var tt = 0u; tt < cnt; tt++) {
      let kr = (t0 + tt) * KVD4 + kb;
      var dot = vec4<f32>(0.0);
      for (var d = 0u; d < HD4; d++) { dot += qv[d] * key4(kr + d); }
      let s = hsum(dot) * SCALE;
      sb[tt] = s;
      bm = max(bm, s);
    }
    let corr = exp(m - bm);
    l *= corr;
    for (var d = 0u; d < HD4; d++) { acc[d] *= corr; }
    for (var tt = 0u; tt < cnt; tt++) {
      let e = exp(sb[tt] - bm);
      l += e;
      let vr = (t0 + tt) * KVD4 + kb;
      for (var d = 0u; d < HD4; d++) { acc[d] += e * value4(vr + d); }
    }
    m = bm;
  }
  for (var d = 0u; d < HD4; d++) { out4[qb + d] = acc[d] / l; }
  ml[(i * H + h) * 2u] = m;
  ml[(i * H + h) * 2u + 1u] = l;
}

// One thread per audio position of a KV head; the queried rows are few (the instruction
// or a window) or, with firstQuery = 0, the whole prompt.
@compute @workgroup_size(64)
fn prefill_scores(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let kh = wid.y + p.kvHead0;
  let a = wid.x * 64u + lid;
  if (a >= p.audioLength) { return; }
  let t = p.audioStart + a;
  var kv: array<vec4<f32>, HD4>;
  for (var d = 0u; d < HD4; d++) { kv[d] = key4(t * KVD4 + kh * HD4 + d); }
  var w = 0.0;
  for (var i = max(max(p.firstQuery, t), p.row0); i < p.n; i++) {
    for (var j = 0u; j < GROUP; j++) {
      let h = kh * GROUP + j;
      let qb = ((i - p.row0) * QD + h * HD) / 4u;
      var dot = vec4<f32>(0.0);
      for (var d = 0u; d < HD4; d++) { dot += q4[qb + d] * kv[d]; }
      w += exp(hsum(dot) * SCALE - mlIn[(i * H + h) * 2u]) / mlIn[(i * H + h) * 2u + 1u];
    }
  }
  scores[(p.layer * HKV + kh) * p.audioLength + a] += w;
}
