// Paged decode attention over a per-head paged KV pool.
// Every (layer, KV head) has its own page table and length; slots whose position is
// EMPTY (-1) are skipped, so heads may hold any subset of positions (WnW's anchor,
// tidal and fixed heads keep different ones); an entry -(c + 1) marks a summary slot
// (mean key and value of c dropped positions), scored with + ln(c) (src/kv/summary.ts).
//   attn_split:  workgroup (kvHead, split) attends the GROUP query heads to PPS pages of
//                the head's table and writes a partial (acc[HD], max, sum) per query head
//                (split-K: long contexts spread over many workgroups).
//   attn_reduce: merges a query head's partials with the usual (max, sum) rescaling and
//                records the final (max, sum) so exported weights can be normalised.
//   attn_export: for the heads a policy asked for, turns the raw scores kept by
//                attn_split into softmax weights summed over the group, scattered to
//                audio offsets (positions not on the GPU stay 0).
// tables: per flat head h, meta[4h..4h+3] = (offset of its page list in `tables`,
// page count, export index or 0xffffffff, 0); page lists follow the meta block.
// Slots are pool-wide (positions, tables and scores index them so); kPool/vPool are the
// shard that holds this layer's heads, whose first slot is lp.base.
// kPool/vPool hold f32 bits, or with KV_F16 two f16 per u32 word (pack2x16float).
// Constants: H, HKV, HD, HALF, GROUP, PAGE, PPS, SCALE, KV_F16.

const CH: u32 = PPS * PAGE;
const NEG: f32 = -3.0e38;
const NONE: u32 = 0xffffffffu;

struct Layer { layer: u32, base: u32, _p1: u32, _p2: u32 }
struct Export { heads: u32, audioStart: u32, audioLength: u32, _p0: u32 }

@group(0) @binding(0) var<storage, read> q: array<f32>;              // [H * HD] this layer
@group(0) @binding(1) var<storage, read> kPool: array<u32>;
@group(0) @binding(2) var<storage, read> vPool: array<u32>;
@group(0) @binding(3) var<storage, read> positions: array<i32>;
@group(0) @binding(4) var<storage, read> tables: array<u32>;
@group(0) @binding(5) var<storage, read_write> scores: array<f32>;   // [slots * GROUP] raw scores
@group(0) @binding(6) var<storage, read_write> partials: array<f32>; // [splits, H, HD + 2]
@group(0) @binding(7) var<uniform> lp: Layer;
@group(0) @binding(8) var<storage, read_write> attnOut: array<f32>;  // [H * HD]
@group(0) @binding(9) var<storage, read_write> ml: array<f32>;       // [layers * H, 2]
@group(0) @binding(10) var<storage, read_write> weights: array<f32>; // [exported, audioLength]
@group(0) @binding(11) var<uniform> ep: Export;
@group(0) @binding(12) var<storage, read> mlIn: array<f32>;

var<workgroup> pg: array<u32, PPS>;
var<workgroup> qs: array<f32, GROUP * HD>;
var<workgroup> sc: array<f32, GROUP * CH>;

@compute @workgroup_size(64)
fn attn_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let kh = wid.x;
  let split = wid.y;
  let head = lp.layer * HKV + kh;
  let off = tables[head * 4u];
  let count = tables[head * 4u + 1u];
  let exported = tables[head * 4u + 2u] != NONE;
  let first = split * PPS;
  if (first >= count) { return; }
  let np = min(PPS, count - first);
  let nslots = np * PAGE;
  for (var i = lid; i < np; i += 64u) { pg[i] = tables[off + first + i]; }
  for (var i = lid; i < GROUP * HD; i += 64u) { qs[i] = q[kh * GROUP * HD + i]; }
  workgroupBarrier();
  for (var idx = lid; idx < CH; idx += 64u) {
    var slot = 0u;
    var valid = false;
    var bias = 0.0;
    if (idx < nslots) {
      slot = pg[idx / PAGE] * PAGE + idx % PAGE;
      let entry = positions[slot];
      valid = entry != -1;
      // A summary slot's entry is -(count + 1): it stands for count positions, + ln(count).
      if (entry < -1) { bias = log(f32(-entry - 1)); }
    }
    for (var j = 0u; j < GROUP; j++) {
      var s = NEG;
      if (valid) {
        var dot = 0.0;
        if (KV_F16) {
          let row = (slot - lp.base) * HALF;
          for (var d = 0u; d < HALF; d++) {
            let kk = unpack2x16float(kPool[row + d]);
            dot += qs[j * HD + 2u * d] * kk.x;
            dot += qs[j * HD + 2u * d + 1u] * kk.y;
          }
        } else {
          for (var d = 0u; d < HD; d++) { dot += qs[j * HD + d] * bitcast<f32>(kPool[(slot - lp.base) * HD + d]); }
        }
        s = dot * SCALE + bias;
        if (exported) { scores[slot * GROUP + j] = s; }
      }
      sc[j * CH + idx] = s;
    }
  }
  workgroupBarrier();
  // Each output (query head j, dim d) scans the chunk's scores for its own (max, sum):
  // a few hundred reads instead of tree reductions, whose barriers cost more on CPU
  // implementations than the repeated exp does on GPUs.
  for (var o = lid; o < GROUP * HD; o += 64u) {
    let j = o / HD;
    let d = o % HD;
    var m = NEG;
    for (var idx = 0u; idx < nslots; idx++) { m = max(m, sc[j * CH + idx]); }
    var l = 0.0;
    var acc = 0.0;
    for (var idx = 0u; idx < nslots; idx++) {
      let v = sc[j * CH + idx];
      if (v > NEG) {
        let e = exp(v - m);
        l += e;
        let slot = pg[idx / PAGE] * PAGE + idx % PAGE;
        var vd: f32;
        if (KV_F16) {
          vd = unpack2x16float(vPool[(slot - lp.base) * HALF + d / 2u])[d % 2u];
        } else {
          vd = bitcast<f32>(vPool[(slot - lp.base) * HD + d]);
        }
        acc += e * vd;
      }
    }
    let pb = (split * H + kh * GROUP + j) * (HD + 2u);
    partials[pb + d] = acc;
    if (d == 0u) {
      partials[pb + HD] = m;
      partials[pb + HD + 1u] = l;
    }
  }
}

@compute @workgroup_size(64)
fn attn_reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let qh = wid.x;
  let head = lp.layer * HKV + qh / GROUP;
  let splits = (tables[head * 4u + 1u] + PPS - 1u) / PPS;
  var M = NEG;
  for (var s = 0u; s < splits; s++) {
    let pb = (s * H + qh) * (HD + 2u);
    if (partials[pb + HD + 1u] > 0.0) { M = max(M, partials[pb + HD]); }
  }
  var L = 0.0;
  for (var s = 0u; s < splits; s++) {
    let pb = (s * H + qh) * (HD + 2u);
    let l = partials[pb + HD + 1u];
    if (l > 0.0) { L += l * exp(partials[pb + HD] - M); }
  }
  for (var d = lid; d < HD; d += 64u) {
    var acc = 0.0;
    for (var s = 0u; s < splits; s++) {
      let pb = (s * H + qh) * (HD + 2u);
      if (partials[pb + HD + 1u] > 0.0) { acc += partials[pb + d] * exp(partials[pb + HD] - M); }
    }
    var o = 0.0;
    if (L > 0.0) { o = acc / L; }
    attnOut[qh * HD + d] = o;
  }
  if (lid == 0u) {
    ml[(lp.layer * H + qh) * 2u] = M;
    ml[(lp.layer * H + qh) * 2u + 1u] = L;
  }
}

// One workgroup per exported head (any layer: pool slots belong to one head, so the
// scores of all layers share one buffer and this runs once per step).
@compute @workgroup_size(64)
fn attn_export(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = wid.x;
  var head = NONE;
  for (var h = 0u; h < ep.heads; h++) {
    if (tables[h * 4u + 2u] == r) { head = h; }
  }
  if (head == NONE) { return; }
  let layer = head / HKV;
  let q0 = layer * H + (head % HKV) * GROUP;
  let off = tables[head * 4u];
  let count = tables[head * 4u + 1u];
  for (var idx = lid; idx < count * PAGE; idx += 64u) {
    let slot = tables[off + idx / PAGE] * PAGE + idx % PAGE;
    let pos = positions[slot];
    if (pos >= i32(ep.audioStart) && pos < i32(ep.audioStart + ep.audioLength)) {
      var wsum = 0.0;
      for (var j = 0u; j < GROUP; j++) {
        let L = mlIn[(q0 + j) * 2u + 1u];
        if (L > 0.0) { wsum += exp(scores[slot * GROUP + j] - mlIn[(q0 + j) * 2u]) / L; }
      }
      weights[r * ep.audioLength + u32(pos) - ep.audioStart] = wsum;
    }
  }
}
