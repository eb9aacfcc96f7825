// Products of W with X in its formats (weights.wgsl), shared by matmul, matvec and the
// encoder's linear: the including shader also declares `x4: array<vec4<f32>>` (X).

//#include weights.wgsl

// ---------------------------------------------------------------- 4 x 4 tiles (prefill products)
// xr: first vec4 of each of 4 X rows; wr: first word of each of 4 W rows. The 4 x 4 block
// of dot products X[xr[a]] . W[wr[b]] over `cols`.
fn tileF32(xr: array<u32, 4>, wr: array<u32, 4>, cols: u32) -> array<vec4<f32>, 4> {
  var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  for (var k = 0u; k < cols / 4u; k++) {
    let w0 = bitcast<vec4<f32>>(w4[wr[0] + k]);
    let w1 = bitcast<vec4<f32>>(w4[wr[1] + k]);
    let w2 = bitcast<vec4<f32>>(w4[wr[2] + k]);
    let w3 = bitcast<vec4<f32>>(w4[wr[3] + k]);
    for (var a = 0u; a < 4u; a++) {
      let xv = x4[xr[a] + k];
      acc[a] += vec4<f32>(dot(xv, w0), dot(xv, w1), dot(xv, w2), dot(xv, w3));
    }
  }
  return acc;
}

fn tileF16(xr: array<u32, 4>, wr: array<u32, 4>, cols: u32) -> array<vec4<f32>, 4> {
  var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  for (var k = 0u; k < cols / 8u; k++) {
    let v0 = w4[wr[0] + k];
    let v1 = w4[wr[1] + k];
    let v2 = w4[wr[2] + k];
    let v3 = w4[wr[3] + k];
    let a0 = lo16(v0); let b0 = hi16(v0);
    let a1 = lo16(v1); let b1 = hi16(v1);
    let a2 = lo16(v2); let b2 = hi16(v2);
    let a3 = lo16(v3); let b3 = hi16(v3);
    for (var a = 0u; a < 4u; a++) {
      let xa = x4[xr[a] + 2u * k];
      let xb = x4[xr[a] + 2u * k + 1u];
      acc[a] += vec4<f32>(dot(xa, a0) + dot(xb, b0), dot(xa, a1) + dot(xb, b1),
                          dot(xa, a2) + dot(xb, b2), dot(xa, a3) + dot(xb, b3));
    }
  }
  return acc;
}

// Per 32-weight group: integer codes against X, then one scale per (row of W) and group.
fn tileQ4(xr: array<u32, 4>, wr: array<u32, 4>, cols: u32) -> array<vec4<f32>, 4> {
  let ng = cols / 32u;
  var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  for (var g = 0u; g < ng; g++) {
    let q0 = w4[wr[0] + g];
    let q1 = w4[wr[1] + g];
    let q2 = w4[wr[2] + g];
    let q3 = w4[wr[3] + g];
    // Initialised explicitly: SwiftShader kept the previous group's sums in a bare `var`.
    var part = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var j = 0u; j < 8u; j++) {
      let word = j / 2u;
      let s = 4u * (j % 2u);
      let c0 = nibbles(q0[word], s);
      let c1 = nibbles(q1[word], s);
      let c2 = nibbles(q2[word], s);
      let c3 = nibbles(q3[word], s);
      for (var a = 0u; a < 4u; a++) {
        let xv = x4[xr[a] + 8u * g + j];
        part[a] += vec4<f32>(dot(xv, c0), dot(xv, c1), dot(xv, c2), dot(xv, c3));
      }
    }
    let sc = vec4<f32>(scaleQ4(wr[0], ng, g), scaleQ4(wr[1], ng, g), scaleQ4(wr[2], ng, g), scaleQ4(wr[3], ng, g));
    for (var a = 0u; a < 4u; a++) { acc[a] += part[a] * sc; }
  }
  return acc;
}

fn tile(xr: array<u32, 4>, wr: array<u32, 4>, cols: u32) -> array<vec4<f32>, 4> {
  if (WEIGHT_FORMAT == 1u) { return tileF16(xr, wr, cols); }
  if (WEIGHT_FORMAT == 2u) { return tileQ4(xr, wr, cols); }
  return tileF32(xr, wr, cols);
}

// ---------------------------------------------------------------- one row (decode products)
// W row `row` . X from vec4 xb on.
fn rowDotF32(row: u32, xb: u32, cols: u32) -> f32 {
  let c4 = cols / 4u;
  let wb = row * c4;
  var acc = vec4<f32>(0.0);
  for (var c = 0u; c < c4; c++) { acc += bitcast<vec4<f32>>(w4[wb + c]) * x4[xb + c]; }
  return (acc.x + acc.y) + (acc.z + acc.w);
}

fn rowDotF16(row: u32, xb: u32, cols: u32) -> f32 {
  let c8 = cols / 8u;
  let wb = row * c8;
  var acc = vec4<f32>(0.0);
  for (var c = 0u; c < c8; c++) {
    let v = w4[wb + c];
    acc += lo16(v) * x4[xb + 2u * c];
    acc += hi16(v) * x4[xb + 2u * c + 1u];
  }
  return (acc.x + acc.y) + (acc.z + acc.w);
}

// The integer codes meet x first; each group's sum is scaled once.
fn rowDotQ4(row: u32, xb: u32, cols: u32) -> f32 {
  let ng = cols / 32u;
  let wb = row * rowWords(cols);
  var acc = 0.0;
  for (var g = 0u; g < ng; g++) {
    let q = w4[wb + g];
    let s = scaleQ4(wb, ng, g);
    let xg = xb + 8u * g;
    var d = nibbles(q.x, 0u) * x4[xg] + nibbles(q.x, 4u) * x4[xg + 1u];
    d += nibbles(q.y, 0u) * x4[xg + 2u] + nibbles(q.y, 4u) * x4[xg + 3u];
    d += nibbles(q.z, 0u) * x4[xg + 4u] + nibbles(q.z, 4u) * x4[xg + 5u];
    d += nibbles(q.w, 0u) * x4[xg + 6u] + nibbles(q.w, 4u) * x4[xg + 7u];
    acc += s * ((d.x + d.y) + (d.z + d.w));
  }
  return acc;
}

fn rowDot(row: u32, xb: u32, cols: u32) -> f32 {
  if (WEIGHT_FORMAT == 1u) { return rowDotF16(row, xb, cols); }
  if (WEIGHT_FORMAT == 2u) { return rowDotQ4(row, xb, cols); }
  return rowDotF32(row, xb, cols);
}
