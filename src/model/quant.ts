/**
 * Weight formats of a PyTorch-layout matrix W [rows, cols] (rows = output features,
 * cols = K, the reduction axis), as the WGSL matvec/matmul read them. A format is a value
 * that specialises the kernels (`WEIGHT_FORMAT` in their constant prelude); every format
 * is an array of little-endian u32 words, row after row, so the kernels bind one
 * `array<vec4<u32>>` whatever the format and a matrix splits by rows into several buffers
 * when it is larger than one storage binding.
 *
 * - `f32` (0): the words are the f32 bits. The reference model's format.
 * - `f16` (1): two binary16 per word, element 2i in the low half (what WGSL's
 *   `unpack2x16float` returns as .x, so no `shader-f16` feature is needed). 2 bytes per
 *   weight; exact for bf16 weights in f16's normal range (|w| >= 6.1e-5: bf16 has 8
 *   significant bits, f16 11), smaller ones lose bits as f16 subnormals.
 * - `q4` (2): groups of 32 consecutive weights along K. Per row: the codes, 4 words per
 *   group, 8 codes per word, element i of a word in bits 4i..4i+3 (low nibble first);
 *   then the group scales as binary16, two per word (group 2j low, 2j+1 high), padded to
 *   a multiple of 4 words so every row starts on a 16-byte boundary (vec4 loads).
 *   w = (code - 8) * scale. 4.5 bits per weight (K = 3072: 1,728 bytes a row).
 *
 * Why this q4: it is ONNX `MatMulNBits` (bits 4, block_size 32, no zero points so the
 * zero point is 8, f16 scales) byte for byte, within a row, and MLC's q4f16_1 word
 * packing; 32-weight groups are the common choice of GGUF Q4_0, MLC and ONNX, and a
 * group is exactly one vec4<u32> of codes. Codes and scales live in the same row so one
 * binding holds a row's everything, row splits need no bookkeeping, and a kernel that
 * reads one row per thread streams one contiguous range.
 *
 * Code range: the full [-8, 7] with GGUF Q4_0's signed scale, scale = m / -8 where m is
 * the group's element of largest magnitude (sign included): m itself is exact (code 0)
 * and all 16 levels are used. MLC's alternative, |m| / 7 with 15 levels, has a 14 %
 * wider step; on Gaussian weights its NMSE is 9.4e-3 against 7.4e-3 for this one
 * (Laplace: 1.47e-2 against 1.14e-2). The cost: an element of the opposite sign and
 * nearly the same magnitude clamps to code 15 (+7), an error of up to one step
 * instead of half a step. The scale is rounded to f16 first and the codes are chosen
 * against the stored scale, so the bound |w - ŵ| <= step/2 (<= step when clamped)
 * holds for what the kernels actually read.
 *
 * K must be a multiple of 32 for q4 (8 for f16, 4 for f32): anything else is rejected
 * with a RangeError; `quantizeTensor` stores such a matrix in the next format that fits.
 * Every matrix of the supported backbones has K a multiple of 32.
 */
import { ModelLoadError } from '../errors.js';
import { f16Bits, f16Table, f16Value } from './f16.js';

export type WeightFormat = 'f32' | 'f16' | 'q4';

/** The value of the kernels' WEIGHT_FORMAT constant. */
export const WEIGHT_FORMAT_ID: Record<WeightFormat, number> = { f32: 0, f16: 1, q4: 2 };

/** Weights per q4 group (one scale each). */
export const Q4_GROUP = 32;

export interface PackedMatrix {
  format: WeightFormat;
  rows: number;
  cols: number;
  /** rows × rowWords(format, cols) little-endian u32 words. */
  data: Uint32Array;
}

/** The K a format needs to be a multiple of (vec4 loads of whole words, whole q4 groups). */
export function colsMultiple(format: WeightFormat): number {
  return format === 'q4' ? Q4_GROUP : format === 'f16' ? 8 : 4;
}

/** u32 words of one row, a multiple of 4 in every format. */
export function rowWords(format: WeightFormat, cols: number): number {
  if (format === 'f32') return cols;
  if (format === 'f16') return cols / 2;
  return cols / 8 + 4 * Math.ceil(cols / 256);
}

export function rowBytes(format: WeightFormat, cols: number): number {
  return 4 * rowWords(format, cols);
}

function checkShape(format: WeightFormat, length: number, rows: number, cols: number): void {
  if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows <= 0 || cols <= 0)
    throw new RangeError(`bad matrix shape [${rows}, ${cols}]`);
  if (length !== rows * cols)
    throw new RangeError(`a [${rows}, ${cols}] matrix needs ${rows * cols} values, got ${length}`);
  const m = colsMultiple(format);
  if (cols % m !== 0) throw new RangeError(`${format} weights need K (cols, ${cols}) to be a multiple of ${m}`);
}

/** Rounds to the nearest bf16 value (ties to even), in place: what a bf16 checkpoint holds. */
export function roundBf16(a: Float32Array): Float32Array {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
  for (let i = 0; i < u.length; i++) {
    const b = u[i];
    if ((b & 0x7f800000) === 0x7f800000) continue; // inf / NaN kept
    u[i] = ((b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000) >>> 0;
  }
  return a;
}

export function packF32(w: Float32Array, rows: number, cols: number): PackedMatrix {
  checkShape('f32', w.length, rows, cols);
  return {
    format: 'f32',
    rows,
    cols,
    data: new Uint32Array(w.buffer.slice(w.byteOffset, w.byteOffset + w.byteLength)),
  };
}

/** Rounds to f16 (nearest, ties to even) and packs two per word. */
export function packF16(w: Float32Array, rows: number, cols: number): PackedMatrix {
  checkShape('f16', w.length, rows, cols);
  const out = new Uint32Array(w.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = (f16Bits(w[2 * i]) | (f16Bits(w[2 * i + 1]) << 16)) >>> 0;
  return { format: 'f16', rows, cols, data: out };
}

/** Group-wise 4-bit codes and f16 scales (layout in the header). */
export function quantizeQ4(w: Float32Array, rows: number, cols: number): PackedMatrix {
  checkShape('q4', w.length, rows, cols);
  const stride = rowWords('q4', cols);
  const groups = cols / Q4_GROUP;
  const out = new Uint32Array(rows * stride);
  for (let r = 0; r < rows; r++) {
    const ob = r * stride;
    for (let g = 0; g < groups; g++) {
      const base = r * cols + g * Q4_GROUP;
      let m = 0;
      let am = 0;
      for (let j = 0; j < Q4_GROUP; j++) {
        const v = w[base + j];
        const a = Math.abs(v);
        if (!(a <= 3.4028234663852886e38))
          throw new RangeError(`weight [${r}, ${g * Q4_GROUP + j}] is ${v}: q4 needs finite weights`);
        if (a > am) {
          am = a;
          m = v;
        }
      }
      const sBits = am === 0 ? 0 : f16Bits(m / -8);
      const s = f16Value(sBits);
      if (!Number.isFinite(s))
        throw new RangeError(`row ${r} group ${g}: |w| = ${am} is beyond what an f16 scale holds (8 × 65504)`);
      // A reciprocal, not a division per weight: it can move a code only where w / s is
      // within an ulp of a half step, where either code is half a step away.
      const inv = s === 0 ? 0 : 1 / s;
      for (let k = 0; k < 4; k++) {
        let word = 0;
        for (let i = 0; i < 8; i++) {
          let q = Math.round(w[base + 8 * k + i] * inv) + 8;
          q = q < 0 ? 0 : q > 15 ? 15 : q;
          word |= q << (4 * i);
        }
        out[ob + 4 * g + k] = word >>> 0;
      }
      out[ob + cols / 8 + (g >> 1)] |= sBits << (16 * (g & 1));
    }
  }
  return { format: 'q4', rows, cols, data: out };
}

/** The stored scale of q4 group g of row r. */
export function q4Scale(m: PackedMatrix, r: number, g: number): number {
  const word = m.data[r * rowWords('q4', m.cols) + m.cols / 8 + (g >> 1)];
  return f16Value((word >>> (16 * (g & 1))) & 0xffff);
}

/** The q4 code (0..15) of element [r, c]. */
export function q4Code(m: PackedMatrix, r: number, c: number): number {
  return (m.data[r * rowWords('q4', m.cols) + (c >> 3)] >>> (4 * (c & 7))) & 15;
}

/** Row r of any format as the exact f32 values the kernels read, into out at offset. */
export function dequantizeRow(m: PackedMatrix, r: number, out: Float32Array, offset = 0): void {
  const stride = rowWords(m.format, m.cols);
  const d = m.data;
  const b = r * stride;
  if (m.format === 'f32') {
    out.set(new Float32Array(d.buffer, d.byteOffset + 4 * b, m.cols), offset);
  } else if (m.format === 'f16') {
    const t = f16Table();
    for (let i = 0; i < m.cols / 2; i++) {
      const word = d[b + i];
      out[offset + 2 * i] = t[word & 0xffff];
      out[offset + 2 * i + 1] = t[word >>> 16];
    }
  } else {
    const t = f16Table();
    const sb = b + m.cols / 8;
    for (let g = 0; g < m.cols / Q4_GROUP; g++) {
      const s = t[(d[sb + (g >> 1)] >>> (16 * (g & 1))) & 0xffff];
      for (let k = 0; k < 4; k++) {
        const word = d[b + 4 * g + k];
        const o = offset + g * Q4_GROUP + 8 * k;
        for (let i = 0; i < 8; i++) out[o + i] = (((word >>> (4 * i)) & 15) - 8) * s;
      }
    }
  }
}

/** The whole matrix as f32 (what a q4 or f16 matrix stands for). */
export function dequantize(m: PackedMatrix): Float32Array {
  const out = new Float32Array(m.rows * m.cols);
  for (let r = 0; r < m.rows; r++) dequantizeRow(m, r, out, r * m.cols);
  return out;
}

/** A q4 matrix as the f32 values it stands for. */
export function dequantizeQ4(m: PackedMatrix): Float32Array {
  if (m.format !== 'q4') throw new RangeError(`dequantizeQ4 got a ${m.format} matrix`);
  return dequantize(m);
}

/** Rows [row0, row0 + rows) as a matrix of their own (a view, no copy). */
export function sliceRows(m: PackedMatrix, row0: number, rows: number): PackedMatrix {
  if (row0 < 0 || rows <= 0 || row0 + rows > m.rows)
    throw new RangeError(`rows [${row0}, ${row0 + rows}) are outside [0, ${m.rows})`);
  const stride = rowWords(m.format, m.cols);
  return { format: m.format, rows, cols: m.cols, data: m.data.subarray(row0 * stride, (row0 + rows) * stride) };
}

export interface RowPart {
  row0: number;
  rows: number;
}

/**
 * Row ranges of at most `maxBytes` each (a storage binding's limit). Every part but the
 * last has a multiple of 64 rows, so its f32 outputs start on a 256-byte boundary and
 * each part's product can write its slice of one output buffer through a binding offset.
 */
export function splitRows(format: WeightFormat, rows: number, cols: number, maxBytes: number): RowPart[] {
  const perRow = rowBytes(format, cols);
  const fit = Math.floor(maxBytes / perRow / 64) * 64;
  if (fit <= 0) throw new RangeError(`64 rows of ${perRow} bytes exceed the binding limit of ${maxBytes} bytes`);
  const parts: RowPart[] = [];
  for (let r = 0; r < rows; r += fit) parts.push({ row0: r, rows: Math.min(fit, rows - r) });
  return parts;
}

/** y = W x with the dequantised weights, f64 accumulation: the kernels' reference. */
export function referenceMatvec(
  m: PackedMatrix,
  x: Float32Array,
  xOffset = 0,
  out = new Float32Array(m.rows),
): Float32Array {
  const row = new Float32Array(m.cols);
  for (let r = 0; r < m.rows; r++) {
    dequantizeRow(m, r, row);
    let acc = 0;
    for (let c = 0; c < m.cols; c++) acc += row[c] * x[xOffset + c];
    out[r] = acc;
  }
  return out;
}

/** Y[n, rows] = X[n, cols] Wᵀ with the dequantised weights, f64 accumulation. */
export function referenceMatmul(
  m: PackedMatrix,
  x: Float32Array,
  n: number,
  out = new Float32Array(n * m.rows),
): Float32Array {
  const row = new Float32Array(m.cols);
  const K = m.cols;
  for (let r = 0; r < m.rows; r++) {
    dequantizeRow(m, r, row);
    for (let i = 0; i < n; i++) {
      let acc = 0;
      for (let c = 0; c < K; c++) acc += row[c] * x[i * K + c];
      out[i * m.rows + r] = acc;
    }
  }
  return out;
}

/** Packs `w` in the given format. */
export function pack(format: WeightFormat, w: Float32Array, rows: number, cols: number): PackedMatrix {
  return format === 'q4'
    ? quantizeQ4(w, rows, cols)
    : format === 'f16'
      ? packF16(w, rows, cols)
      : packF32(w, rows, cols);
}

/** A checkpoint tensor in the format it is stored and uploaded in. */
export interface QuantizedTensor extends PackedMatrix {
  name: string;
  /** The upstream shape. Tensors that are not matrices are one f32 row of their size. */
  shape: number[];
}

/**
 * A tensor as `npx wnw convert` stores it: a matrix in `target` when its K allows it,
 * else the next format that does (q4, then f16, then f32); vectors (norms, biases) and
 * tensors of other ranks stay f32, since they are small and read by other kernels.
 * `file` names the checkpoint file in errors.
 */
export function quantizeTensor(
  name: string,
  values: Float32Array,
  shape: number[],
  target: WeightFormat = 'q4',
  file = name,
): QuantizedTensor {
  const size = shape.reduce((a, b) => a * b, 1);
  if (values.length !== size)
    throw new ModelLoadError(file, `has ${values.length} values for shape [${shape.join(', ')}] (${size})`, name);
  if (shape.length !== 2) {
    const data = new Uint32Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength));
    return { name, shape: [...shape], format: 'f32', rows: 1, cols: size, data };
  }
  const [rows, cols] = shape;
  const order: WeightFormat[] = target === 'q4' ? ['q4', 'f16', 'f32'] : target === 'f16' ? ['f16', 'f32'] : ['f32'];
  const format = order.find((f) => cols % colsMultiple(f) === 0);
  if (!format) throw new ModelLoadError(file, `has K = ${cols} columns; the WebGPU kernels need a multiple of 4`, name);
  try {
    return { name, shape: [rows, cols], ...pack(format, values, rows, cols) };
  } catch (e) {
    throw new ModelLoadError(file, `cannot be stored as ${format}: ${(e as Error).message}`, name);
  }
}
