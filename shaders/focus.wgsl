// Word timing's focus on the GPU: the anchors' exported attention summed per position (one
// thread's f32 sum over the rows in order, as src/session/timing.ts anchorSum), and its top
// four positions with mass (> 0) in (weight descending, position ascending), focusOf's
// choice. The readback carries those four (position, weight) pairs, 32 bytes instead of T
// floats per anchor; the CPU takes their weighted centre in f64 (focusCentre), so both
// backends date a token alike. One workgroup: each thread keeps the top four of its
// positions, then pairs of lists merge down a tree.

struct Params {
  heads: u32,        // rows of `weights` summed (the anchors, first in the export)
  audioLength: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> weights: array<f32>;
// Positions 0..3 (NONE where fewer hold mass), then the four sums' bits.
@group(0) @binding(1) var<storage, read_write> top: array<u32>;
@group(0) @binding(2) var<uniform> u: Params;

const K = 4u;
const NONE = 0xffffffffu;
var<workgroup> listW: array<f32, 1024>;
var<workgroup> listP: array<u32, 1024>;

// The strict order of focusOf's list: more weight first, the lower position on a tie.
fn precedes(wa: f32, pa: u32, wb: f32, pb: u32) -> bool {
  return wa > wb || (wa == wb && pa < pb);
}

@compute @workgroup_size(256)
fn focus_top(@builtin(local_invocation_index) lid: u32) {
  var w: array<f32, 4>;
  var p: array<u32, 4>;
  for (var k = 0u; k < K; k++) {
    w[k] = 0.0;
    p[k] = NONE;
  }
  for (var i = lid; i < u.audioLength; i += 256u) {
    var a = 0.0;
    for (var r = 0u; r < u.heads; r++) {
      a = a + weights[r * u.audioLength + i];
    }
    if (a > 0.0 && precedes(a, i, w[K - 1u], p[K - 1u])) {
      var j = K - 1u;
      while (j > 0u && precedes(a, i, w[j - 1u], p[j - 1u])) {
        w[j] = w[j - 1u];
        p[j] = p[j - 1u];
        j--;
      }
      w[j] = a;
      p[j] = i;
    }
  }
  for (var k = 0u; k < K; k++) {
    listW[lid * K + k] = w[k];
    listP[lid * K + k] = p[k];
  }
  workgroupBarrier();
  for (var span = 128u; span > 0u; span >>= 1u) {
    if (lid < span) {
      let a0 = lid * K;
      let b0 = (lid + span) * K;
      var a = 0u;
      var b = 0u;
      for (var k = 0u; k < K; k++) {
        if (b >= K || (a < K && precedes(listW[a0 + a], listP[a0 + a], listW[b0 + b], listP[b0 + b]))) {
          w[k] = listW[a0 + a];
          p[k] = listP[a0 + a];
          a++;
        } else {
          w[k] = listW[b0 + b];
          p[k] = listP[b0 + b];
          b++;
        }
      }
    }
    workgroupBarrier();
    if (lid < span) {
      for (var k = 0u; k < K; k++) {
        listW[lid * K + k] = w[k];
        listP[lid * K + k] = p[k];
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    for (var k = 0u; k < K; k++) {
      top[k] = listP[k];
      top[K + k] = bitcast<u32>(listW[k]);
    }
  }
}
