// A decode step's writes into the KV pool, from one landing buffer: the recalled rows (and
// summary slots) into their pages, the changed positions and page-table entries into theirs.
// The step's upload is copied into `landing` whole; its first words are the index table:
// landing[0] = entries, then entries of four words from word 4 (src/reference/scatter-rows.ts):
//   rows:  (dst slot within the shard, src word of the keys, rows, shard); the values follow
//          the keys at src + rows * row words, K and V of a run contiguous as the CPU store keeps them.
//   words: (dst word, src word, words, WORDS | target), target 0: positions, 1: page tables.
// One workgroup per entry (a run is at most a page of rows); a dispatch writes the rows of its
// own shard (p.shard) and, where p.words, every word entry, so a pool of one shard takes
// one dispatch a step. Copies are of u32 words: f32 bits, or two f16 a word (KV_F16).
// Constants: HD, KV_F16.

struct Params { shard: u32, words: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<storage, read> landing: array<u32>;
@group(0) @binding(1) var<storage, read_write> kPool: array<u32>;     // this shard's slots
@group(0) @binding(2) var<storage, read_write> vPool: array<u32>;
@group(0) @binding(3) var<storage, read_write> positions: array<u32>; // Residency.positions' bits
@group(0) @binding(4) var<storage, read_write> tables: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

const WORDS: u32 = 0x80000000u;

@compute @workgroup_size(64)
fn scatter_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let e = wid.x + wid.y * nwg.x;
  if (e >= landing[0]) { return; }
  let b = 4u + 4u * e;
  let dst = landing[b];
  let src = landing[b + 1u];
  let n = landing[b + 2u];
  let tag = landing[b + 3u];
  if ((tag & WORDS) != 0u) {
    if (p.words == 0u) { return; }
    if ((tag & 1u) == 0u) {
      for (var i = lid; i < n; i += 64u) { positions[dst + i] = landing[src + i]; }
    } else {
      for (var i = lid; i < n; i += 64u) { tables[dst + i] = landing[src + i]; }
    }
    return;
  }
  if (tag != p.shard) { return; }
  let per = select(HD, HD / 2u, KV_F16);
  let words = n * per;
  let at = dst * per;
  for (var i = lid; i < words; i += 64u) {
    kPool[at + i] = landing[src + i];
    vPool[at + i] = landing[src + words + i];
  }
}
