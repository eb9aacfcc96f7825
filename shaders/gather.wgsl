// Prefill KV -> pool pages: entry e copies row seq of KV head kh of this layer's prefill
// K/V into pool slot `slot` (entries are (slot, seq, kh) triples, made by
// Residency.applyPrefill's gathers). One thread per (entry, dim). Slots are pool-wide;
// kPool/vPool are the shard that holds this layer, starting at slot p.base.
// The prefill K/V hold the pool's precision (rope_split wrote them so): f32 bits, or with
// KV_F16 two f16 per u32 word, and a thread copies one word (threads past its row's words return).
// Constants: HD, HALF, KVD, KV_F16.

struct Params { first: u32, count: u32, base: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> entries: array<u32>;         // (slot, seq, kh) triples
@group(0) @binding(1) var<storage, read> srcK: array<u32>;            // the layer's prefill K, rows of KVD values
@group(0) @binding(2) var<storage, read> srcV: array<u32>;            // and V (both in the pool's precision)
@group(0) @binding(3) var<storage, read_write> kPool: array<u32>;     // this shard's slots, from slot p.base
@group(0) @binding(4) var<storage, read_write> vPool: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn kv_gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * 64u + lid;
  let per = select(HD, HALF, KV_F16);
  let e = t / per;
  let d = t % per;
  if (e >= p.count) { return; }
  let b = (p.first + e) * 3u;
  let slot = entries[b] - p.base;
  let src = (entries[b + 1u] * KVD + entries[b + 2u] * HD) / select(1u, 2u, KV_F16);
  kPool[slot * per + d] = srcK[src + d];
  vPool[slot * per + d] = srcV[src + d];
}
