// Q/K/V projection + rotate-half RoPE + KV append.
//   qkv_rope_append (decode): one workgroup of HD threads per head vector (H query heads,
//     then HKV key heads, then HKV value heads; Wqkv is [q; k; v] concatenated), each thread
//     one row; the rotated key and the value go straight into the pool slot that the
//     residency reserved for this (layer, KV head), so no separate append pass exists.
//     Slots are pool-wide; kPool/vPool are the shard of this layer, starting at slot lp.base.
//   append_positions (decode): the position entry of each (layer, KV head)'s new slot, the
//     one qkv_rope_append writes into, so a step's appends cost the CPU one write of the
//     step's slots, not one upload per head (pp.n = heads).
//   rope_split (prefill): rotates the rows of a [n, QD + 2 KVD] matmul output into q and
//     the layer's prefill K/V buffers (the policies choose from those afterwards), which
//     hold the pool's precision: [n, KVD] f32 bits, or with KV_F16 [n, KVD / 2] f16 pairs.
// cos/sin come from a table computed in f64 on the CPU: f32 angles pos * freq lose
// ~1e-4 rad at a few thousand positions, which would break parity with ops.rope.
// KV_F16: the pool stores keys and values as f16, two per u32 word (pack2x16float, no
// shader-f16 feature needed); otherwise as f32 bits. The prefill K/V are stored the same
// way, so the prefill's attention sees what the pool will hold and a gather only copies words.
// HAS_BIAS (Qwen2 family): q/k/v carry biases [QD + 2 KVD], in the order of Wqkv's rows,
// added before RoPE; without them the bias binding is a placeholder that is never read.
// WEIGHT_FORMAT (src/model/quant.ts): Wqkv is read by weights.wgsl. f32 reads the same
// values in the same order as an array<f32> would, so the f32 path is exact.
// Constants: D, H, HKV, HD, HALF, QD, KVD, KV_F16, HAS_BIAS, WEIGHT_FORMAT.

struct Step { pos: u32, _p0: u32, _p1: u32, _p2: u32, slots: array<u32> }
struct Layer { layer: u32, base: u32, _p1: u32, _p2: u32 }
struct Params { n: u32, pos0: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> w4: array<vec4<u32>>;   // Wqkv [QD + 2 KVD, D] in WEIGHT_FORMAT
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [D] (decode) | qkv [n, QD + 2 KVD] (prefill)
@group(0) @binding(2) var<storage, read_write> q: array<f32>;    // [H * HD] | [n, QD]
// The pool's words (qkv_rope_append) or the prefill K/V's [n, KVD] (rope_split), in the pool's precision.
@group(0) @binding(3) var<storage, read_write> kPool: array<u32>;
@group(0) @binding(4) var<storage, read_write> vPool: array<u32>;
@group(0) @binding(5) var<storage, read> rope: array<f32>;       // [maxPos, HALF, 2] cos, sin
@group(0) @binding(6) var<storage, read> st: Step;
@group(0) @binding(7) var<uniform> lp: Layer;
@group(0) @binding(8) var<uniform> pp: Params;
@group(0) @binding(9) var<storage, read> bias: array<f32>;       // [QD + 2 KVD] q, k, v biases
@group(0) @binding(10) var<storage, read_write> positions: array<i32>; // the pool's, per slot (append_positions)

//#include weights.wgsl

// Row r of Wqkv times x, one thread per row. q4 sums each 32-weight group before scaling
// it; the other formats accumulate weight by weight.
fn rowDot(r: u32) -> f32 {
  var acc = 0.0;
  if (WEIGHT_FORMAT == 2u) {
    let b = r * rowWords(D);
    for (var g = 0u; g < D / 32u; g++) {
      let s = scaleQ4(b, D / 32u, g);
      var part = 0.0;
      for (var k = 0u; k < 4u; k++) {
        let word = w4[b + g][k];
        let c0 = 32u * g + 8u * k;
        for (var i = 0u; i < 8u; i++) { part += (f32((word >> (4u * i)) & 15u) - 8.0) * x[c0 + i]; }
      }
      acc += s * part;
    }
  } else {
    for (var c = 0u; c < D; c++) { acc += weightAt(r, c, D) * x[c]; }
  }
  return acc;
}

var<workgroup> vals: array<f32, HD>;
var<workgroup> outs: array<f32, HD>;

@compute @workgroup_size(HD)
fn qkv_rope_append(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) d: u32) {
  let hv = wid.x;
  let r = hv * HD + d;
  var acc = rowDot(r);
  if (HAS_BIAS) { acc += bias[r]; }
  vals[d] = acc;
  workgroupBarrier();
  var outV = acc;
  if (hv < H + HKV) {
    let i = d % HALF;
    let rb = (st.pos * HALF + i) * 2u;
    let cs = rope[rb];
    let sn = rope[rb + 1u];
    if (d < HALF) {
      outV = vals[d] * cs - vals[d + HALF] * sn;
    } else {
      outV = vals[d] * cs + vals[d - HALF] * sn;
    }
  }
  if (hv < H) {
    q[hv * HD + d] = outV;
    return;
  }
  let kv = select(hv - H - HKV, hv - H, hv < H + HKV);
  let slot = st.slots[lp.layer * HKV + kv] - lp.base;
  if (KV_F16) {
    outs[d] = outV;
    workgroupBarrier();
    if (d < HALF) {
      let w = pack2x16float(vec2<f32>(outs[2u * d], outs[2u * d + 1u]));
      if (hv < H + HKV) { kPool[slot * HALF + d] = w; } else { vPool[slot * HALF + d] = w; }
    }
  } else if (hv < H + HKV) {
    kPool[slot * HD + d] = bitcast<u32>(outV);
  } else {
    vPool[slot * HD + d] = bitcast<u32>(outV);
  }
}

@compute @workgroup_size(64)
fn append_positions(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= pp.n) { return; }
  positions[st.slots[gid.x]] = i32(st.pos);
}

// Rotated dims (j, j + HALF) of head vector hv of the row starting at src.
fn rotated(src: u32, hv: u32, j: u32, pos: u32) -> vec2<f32> {
  let a = src + hv * HD + j;
  var x0 = x[a];
  var x1 = x[a + HALF];
  if (HAS_BIAS) {
    x0 += bias[hv * HD + j];
    x1 += bias[hv * HD + j + HALF];
  }
  let rb = (pos * HALF + j) * 2u;
  let cs = rope[rb];
  let sn = rope[rb + 1u];
  return vec2<f32>(x0 * cs - x1 * sn, x1 * cs + x0 * sn);
}

fn valueAt(src: u32, t: u32) -> f32 {
  var y = x[src + QD + KVD + t];
  if (HAS_BIAS) { y += bias[QD + KVD + t]; }
  return y;
}

// With KV_F16 a thread packs adjacent dims (j, j + 1) of a key, both halves of the
// rotation (HALF is even: HD % 4 == 0), and adjacent dims of a value.
@compute @workgroup_size(64)
fn rope_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x;
  if (i >= pp.n) { return; }
  let pos = pp.pos0 + i;
  let src = i * (QD + 2u * KVD);
  for (var t = lid; t < H * HALF; t += 64u) {
    let hv = t / HALF;
    let j = t % HALF;
    let y = rotated(src, hv, j, pos);
    let o = i * QD + hv * HD + j;
    q[o] = y.x;
    q[o + HALF] = y.y;
  }
  if (KV_F16) {
    for (var t = lid; t < HKV * HALF / 2u; t += 64u) {
      let kh = t / (HALF / 2u);
      let j = 2u * (t % (HALF / 2u));
      let a = rotated(src, H + kh, j, pos);
      let b = rotated(src, H + kh, j + 1u, pos);
      let o = (i * KVD + kh * HD + j) / 2u;
      kPool[o] = pack2x16float(vec2<f32>(a.x, b.x));
      kPool[o + HALF / 2u] = pack2x16float(vec2<f32>(a.y, b.y));
    }
    for (var t = lid; t < KVD / 2u; t += 64u) {
      vPool[i * (KVD / 2u) + t] = pack2x16float(vec2<f32>(valueAt(src, 2u * t), valueAt(src, 2u * t + 1u)));
    }
  } else {
    for (var t = lid; t < HKV * HALF; t += 64u) {
      let kh = t / HALF;
      let j = t % HALF;
      let y = rotated(src, H + kh, j, pos);
      let o = i * KVD + kh * HD + j;
      kPool[o] = bitcast<u32>(y.x);
      kPool[o + HALF] = bitcast<u32>(y.y);
    }
    for (var t = lid; t < KVD; t += 64u) { vPool[i * KVD + t] = bitcast<u32>(valueAt(src, t)); }
  }
}
