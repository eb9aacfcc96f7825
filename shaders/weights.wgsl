// Weight-format readers, shared by the weight kernels (`//#include weights.wgsl`: the
// embedding, the decode QKV projection; through weight_tiles.wgsl matmul, matvec and the
// encoder's linear). W [rows,
// cols] is in WEIGHT_FORMAT (src/model/quant.ts):
// 0 f32 bits; 1 f16 pairs (cols % 8 == 0); 2 q4 (cols % 32 == 0): per row the 4-bit codes,
// 4 words per 32-weight group, then the groups' f16 scales two per word, padded to vec4s.
// Every format binds W as vec4<u32> words, and f32 bitcasts them back, exactly.
// The including shader declares `w4: array<vec4<u32>>` (W) and the constant WEIGHT_FORMAT;
// row starts and offsets count vec4 words unless they say u32.

// vec4 words per row of W.
fn rowWords(cols: u32) -> u32 {
  if (WEIGHT_FORMAT == 1u) { return cols / 8u; }
  if (WEIGHT_FORMAT == 2u) { return cols / 32u + (cols + 255u) / 256u; }
  return cols / 4u;
}

fn lo16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)); }
fn hi16(v: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)); }

// Codes 4s .. 4s+3 of a word (s = 0: elements 0-3, s = 4: elements 4-7), as code - 8.
fn nibbles(v: u32, s: u32) -> vec4<f32> {
  let q = (vec4<u32>(v) >> vec4<u32>(4u * s, 4u * s + 4u, 4u * s + 8u, 4u * s + 12u)) & vec4<u32>(15u);
  return vec4<f32>(q) - vec4<f32>(8.0);
}

// The f16 scale of group g of the q4 row at word rowBase (ng groups a row).
fn scaleQ4(rowBase: u32, ng: u32, g: u32) -> f32 {
  return unpack2x16float(w4[rowBase + ng + g / 8u][(g / 2u) % 4u])[g % 2u];
}

// u32 word i of W.
fn wordAt(i: u32) -> u32 { return w4[i / 4u][i % 4u]; }

// Element c of row r, exactly as quant.dequantizeRow.
fn weightAt(r: u32, c: u32, cols: u32) -> f32 {
  let base = 4u * r * rowWords(cols);
  if (WEIGHT_FORMAT == 1u) { return unpack2x16float(wordAt(base + c / 2u))[c % 2u]; }
  if (WEIGHT_FORMAT == 2u) {
    let code = (wordAt(base + c / 8u) >> (4u * (c % 8u))) & 15u;
    let g = c / 32u;
    let s = unpack2x16float(wordAt(base + cols / 8u + g / 2u))[g % 2u];
    return (f32(code) - 8.0) * s;
  }
  return bitcast<f32>(wordAt(base + c));
}
