// Q/K/V projection + rotate-half RoPE + KV append.
//   qkv_rope_append (decode): one workgroup of HD threads per head vector (H query heads,
//     then HKV key heads, then HKV value heads; Wqkv is [q; k; v] concatenated), each thread
//     one row; the rotated key and the value go straight into the pool slot that the
//     residency reserved for this (layer, KV head), so no separate append pass exists.
//     Slots are pool-wide; kOut/vOut are the shard of this layer, starting at slot lp.base.
//   rope_split (prefill): rotates the rows of a [n, QD + 2 KVD] matmul output into q and
//     the layer's prefill K/V buffers (the policies choose from those afterwards).
// cos/sin come from a table computed in f64 on the CPU: f32 angles pos * freq lose
// ~1e-4 rad at a few thousand positions, which would break parity with ops.rope.
// KV_F16: the pool stores keys and values as f16, two per u32 word (pack2x16float, no
// shader-f16 feature needed); otherwise as f32 bits. The prefill K/V stay f32.
// Constants: D, H, HKV, HD, HALF, QD, KVD, KV_F16.

struct Step { pos: u32, _p0: u32, _p1: u32, _p2: u32, slots: array<u32> }
struct Layer { layer: u32, base: u32, _p1: u32, _p2: u32 }
struct Params { n: u32, pos0: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> w: array<f32>;          // Wqkv [QD + 2 KVD, D]
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [D] (decode) | qkv [n, QD + 2 KVD] (prefill)
@group(0) @binding(2) var<storage, read_write> q: array<f32>;    // [H * HD] | [n, QD]
@group(0) @binding(3) var<storage, read_write> kOut: array<f32>; // prefill K [n, KVD]
@group(0) @binding(4) var<storage, read_write> vOut: array<f32>; // prefill V [n, KVD]
// The same bindings as the pool's words in qkv_rope_append (each entry point uses one pair).
@group(0) @binding(3) var<storage, read_write> kPool: array<u32>;
@group(0) @binding(4) var<storage, read_write> vPool: array<u32>;
@group(0) @binding(5) var<storage, read> rope: array<f32>;       // [maxPos, HALF, 2] cos, sin
@group(0) @binding(6) var<storage, read> st: Step;
@group(0) @binding(7) var<uniform> lp: Layer;
@group(0) @binding(8) var<uniform> pp: Params;

var<workgroup> vals: array<f32, HD>;
var<workgroup> outs: array<f32, HD>;

@compute @workgroup_size(HD)
fn qkv_rope_append(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) d: u32) {
  let hv = wid.x;
  let r = hv * HD + d;
  var acc = 0.0;
  for (var c = 0u; c < D; c++) { acc += w[r * D + c] * x[c]; }
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
fn rope_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x;
  if (i >= pp.n) { return; }
  let pos = pp.pos0 + i;
  let src = i * (QD + 2u * KVD);
  for (var t = lid; t < (H + HKV) * HALF; t += 64u) {
    let hv = t / HALF;
    let j = t % HALF;
    let a = src + hv * HD + j;
    let x0 = x[a];
    let x1 = x[a + HALF];
    let rb = (pos * HALF + j) * 2u;
    let cs = rope[rb];
    let sn = rope[rb + 1u];
    let y0 = x0 * cs - x1 * sn;
    let y1 = x1 * cs + x0 * sn;
    if (hv < H) {
      let o = i * QD + hv * HD + j;
      q[o] = y0;
      q[o + HALF] = y1;
    } else {
      let o = i * KVD + (hv - H) * HD + j;
      kOut[o] = y0;
      kOut[o + HALF] = y1;
    }
  }
  for (var t = lid; t < KVD; t += 64u) { vOut[i * KVD + t] = x[src + QD + KVD + t]; }
}
