// WnW's chunk choice on the GPU: the anchors' exported attention summed per segment, each
// chunk's mean (sum × its f32 1/length, uploaded: a GPU division is not correctly rounded),
// and the top k chunks, best first, ties to the lower index. The readback then carries k
// chunk indices (and, when asked, the segment sums) instead of T floats per anchor.
// Every sum is one thread's, in the order of src/reference/chunk-select.ts (a row's anchors,
// then a segment's positions, then a chunk's segments), so both backends choose the same
// chunks bit for bit. One workgroup: the ranking compares every pair of chunks (thousands
// at most: 2 s chunks of a 2-hour recording).

struct Params {
  heads: u32,        // rows of `weights` summed (the anchors, first in the export)
  audioLength: u32,
  segLen: u32,
  chunkSegs: u32,
  topK: u32,
  segments: u32,
  chunks: u32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read> weights: array<f32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read_write> segSums: array<f32>;
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;
@group(0) @binding(4) var<storage, read_write> chosen: array<u32>;
@group(0) @binding(5) var<uniform> u: Params;

@compute @workgroup_size(256)
fn chunk_select(@builtin(local_invocation_index) lid: u32) {
  for (var g = lid; g < u.segments; g += 256u) {
    var seg = 0.0;
    let end = min(u.audioLength, (g + 1u) * u.segLen);
    for (var p = g * u.segLen; p < end; p++) {
      var a = 0.0;
      for (var r = 0u; r < u.heads; r++) {
        a = a + weights[r * u.audioLength + p];
      }
      seg = seg + a;
    }
    segSums[g] = seg;
  }
  storageBarrier();
  for (var c = lid; c < u.chunks; c += 256u) {
    var sum = 0.0;
    let last = min(u.segments, c + u.chunkSegs);
    for (var g = c; g < last; g++) {
      sum = sum + segSums[g];
    }
    scores[c] = sum * scales[c];
  }
  storageBarrier();
  // A chunk's rank is the number of chunks before it in (score descending, index
  // ascending), a strict total order: each rank below k is written by exactly one thread.
  for (var c = lid; c < u.chunks; c += 256u) {
    let sc = scores[c];
    var rank = 0u;
    for (var b = 0u; b < u.chunks; b++) {
      let sb = scores[b];
      if (sb > sc || (sb == sc && b < c)) {
        rank++;
      }
    }
    if (rank < u.topK) {
      chosen[rank] = c;
    }
  }
}
