/**
 * The decoder's weights in one weight format (src/model/quant.ts), as both backends use
 * them: the GPU uploads the packed matrices, the CPU decodes with their dequantised
 * values, so the two compute with exactly the same model and greedy tokens agree.
 *
 * The matrices are laid out as the WebGPU decoder reads them: Q, K and V concatenated
 * into Wqkv [QD + 2 KVD, D], gate and up into [2 I, D]. Group-wise q4 and f16 work along
 * K within a row, so packing the concatenation equals concatenating the packed parts.
 * A matrix whose K the requested format cannot take is stored in the next one that can
 * (q4, then f16, then f32), the same rule as `npx wnw convert` (quant.quantizeTensor).
 * Norms and biases stay f32.
 *
 * The embedding table is packed like every other matrix, q4 included, not kept f16: a
 * tied lm_head (Qwen2.5-Omni-3B) must read the very table the gather reads, and one q4
 * copy serves both; Voxtral's 131,072 × 3,072 table is 216 MiB in q4 against 768 MiB in
 * f16 (which would add a quarter to its 2.1 GiB q4 decoder); and the gather dequantises
 * one row per token, a negligible cost.
 */
import { colsMultiple, dequantize, pack, rowBytes, sliceRows, type PackedMatrix, type WeightFormat } from './quant.js';
import type { ModelConfig } from './config.js';
import type { DecoderWeights, LayerWeights } from './weights.js';

export interface PackedLayer {
  attnNorm: Float32Array;
  qkv: PackedMatrix;
  /** q/k/v biases [QD + 2 KVD] in Wqkv's row order, present iff config.attentionBias. */
  qkvBias?: Float32Array;
  o: PackedMatrix;
  mlpNorm: Float32Array;
  gateUp: PackedMatrix;
  down: PackedMatrix;
}

export interface PackedDecoderWeights {
  /** The requested format (single matrices may fall back, see matrixFormat). */
  format: WeightFormat;
  embed: PackedMatrix;
  layers: PackedLayer[];
  norm: Float32Array;
  /** The same object as `embed` when the head is tied to the embedding. */
  lmHead: PackedMatrix;
}

export const WEIGHT_FORMATS: readonly WeightFormat[] = ['f32', 'f16', 'q4'];

export function isWeightFormat(v: unknown): v is WeightFormat {
  return typeof v === 'string' && (WEIGHT_FORMATS as readonly string[]).includes(v);
}

/** The format a [rows, cols] matrix is stored in when `format` is asked for. */
export function matrixFormat(format: WeightFormat, cols: number): WeightFormat {
  const order: WeightFormat[] = format === 'q4' ? ['q4', 'f16', 'f32'] : format === 'f16' ? ['f16', 'f32'] : ['f32'];
  const f = order.find((x) => cols % colsMultiple(x) === 0);
  if (!f)
    throw new RangeError(
      `a matrix with K = ${cols} columns cannot be read by the WebGPU kernels (K must be a multiple of 4)`,
    );
  return f;
}

function concat(...parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function packAs(format: WeightFormat, w: Float32Array, rows: number, cols: number): PackedMatrix {
  return pack(matrixFormat(format, cols), w, rows, cols);
}

/** True when the head is the embedding table itself (tied weights). */
export function tiedHead(w: DecoderWeights): boolean {
  return w.lmHead === w.embed;
}

export function packDecoderWeights(c: ModelConfig, w: DecoderWeights, format: WeightFormat): PackedDecoderWeights {
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const layers = w.layers.map((l, i): PackedLayer => {
    if (c.attentionBias && (!l.qBias || !l.kBias || !l.vBias))
      throw new RangeError(`layer ${i}: the config says q/k/v biases but the weights have none`);
    return {
      attnNorm: l.attnNorm,
      qkv: packAs(format, concat(l.q, l.k, l.v), QD + 2 * KVD, D),
      ...(c.attentionBias ? { qkvBias: concat(l.qBias!, l.kBias!, l.vBias!) } : {}),
      o: packAs(format, l.o, D, QD),
      mlpNorm: l.mlpNorm,
      gateUp: packAs(format, concat(l.gate, l.up), 2 * I, D),
      down: packAs(format, l.down, D, I),
    };
  });
  const embed = packAs(format, w.embed, c.vocabSize, D);
  const lmHead = tiedHead(w) ? embed : packAs(format, w.lmHead, c.vocabSize, D);
  return { format, embed, layers, norm: w.norm, lmHead };
}

/**
 * Rows of several matrices of one format and K, stacked (a row's words never depend on its
 * neighbours). Parts already adjacent in one buffer, in order, are stacked as a view of it.
 */
export function concatRows(name: string, parts: PackedMatrix[]): PackedMatrix {
  const { format, cols } = parts[0];
  const odd = parts.find((m) => m.format !== format || m.cols !== cols);
  if (odd)
    throw new RangeError(
      `${name}: cannot stack a ${odd.format} [${odd.rows}, ${odd.cols}] matrix under ${format} [*, ${cols}] ones`,
    );
  const first = parts[0].data;
  const adjacent = parts.every(
    (m, i) =>
      i === 0 ||
      (m.data.buffer === first.buffer &&
        m.data.byteOffset === parts[i - 1].data.byteOffset + parts[i - 1].data.byteLength),
  );
  if (adjacent) {
    const length = parts.reduce((n, m) => n + m.data.length, 0);
    return {
      format,
      rows: parts.reduce((n, m) => n + m.rows, 0),
      cols,
      data: new Uint32Array(first.buffer, first.byteOffset, length),
    };
  }
  const data = new Uint32Array(parts.reduce((n, m) => n + m.data.length, 0));
  let o = 0;
  for (const m of parts) {
    data.set(m.data, o);
    o += m.data.length;
  }
  return { format, rows: parts.reduce((n, m) => n + m.rows, 0), cols, data };
}

/**
 * Packed weights from tensors already packed one by one (a converted folder): `get`
 * returns the internal name's matrix (vectors as one f32 row); a head that is the
 * embedding's very object stays shared.
 */
export function packedDecoderFrom(c: ModelConfig, get: (internal: string) => PackedMatrix): PackedDecoderWeights {
  const vec = (name: string): Float32Array => {
    const m = get(name);
    if (m.format !== 'f32') throw new RangeError(`${name} is ${m.format}; vectors are f32`);
    return new Float32Array(m.data.buffer, m.data.byteOffset, m.data.length);
  };
  const layers = Array.from({ length: c.numLayers }, (_, i): PackedLayer => {
    const p = `layers.${i}.`;
    return {
      attnNorm: vec(p + 'attn_norm.weight'),
      qkv: concatRows(p + 'qkv', [get(p + 'q_proj.weight'), get(p + 'k_proj.weight'), get(p + 'v_proj.weight')]),
      ...(c.attentionBias
        ? { qkvBias: concat(vec(p + 'q_proj.bias'), vec(p + 'k_proj.bias'), vec(p + 'v_proj.bias')) }
        : {}),
      o: get(p + 'o_proj.weight'),
      mlpNorm: vec(p + 'mlp_norm.weight'),
      gateUp: concatRows(p + 'gate_up', [get(p + 'gate_proj.weight'), get(p + 'up_proj.weight')]),
      down: get(p + 'down_proj.weight'),
    };
  });
  const embed = get('embed_tokens.weight');
  const head = get('lm_head.weight');
  const formats = new Set([embed, head, ...layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])].map((m) => m.format));
  const format = formats.has('q4') ? 'q4' : formats.has('f16') ? 'f16' : 'f32';
  return { format, embed, layers, norm: vec('norm.weight'), lmHead: head };
}

/**
 * The f32 weights a packed model stands for, exactly as the kernels read them (q4 codes
 * times their f16 scales, f16 values widened). q, k, v, gate and up are views into the
 * dequantised concatenations.
 */
export function unpackDecoderWeights(c: ModelConfig, p: PackedDecoderWeights): DecoderWeights {
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const layers = p.layers.map((l): LayerWeights => {
    const qkv = dequantize(l.qkv);
    const gu = dequantize(l.gateUp);
    const out: LayerWeights = {
      attnNorm: l.attnNorm,
      q: qkv.subarray(0, QD * D),
      k: qkv.subarray(QD * D, (QD + KVD) * D),
      v: qkv.subarray((QD + KVD) * D),
      o: dequantize(l.o),
      mlpNorm: l.mlpNorm,
      gate: gu.subarray(0, I * D),
      up: gu.subarray(I * D),
      down: dequantize(l.down),
    };
    if (l.qkvBias) {
      out.qBias = l.qkvBias.subarray(0, QD);
      out.kBias = l.qkvBias.subarray(QD, QD + KVD);
      out.vBias = l.qkvBias.subarray(QD + KVD);
    }
    return out;
  });
  const embed = dequantize(p.embed);
  const lmHead = p.lmHead === p.embed ? embed : dequantize(p.lmHead);
  return { embed, layers, norm: p.norm, lmHead };
}

/** A matrix the CPU computes with: f32 values, or an f16/q4 one dequantised a tile at a time (reference/matrix.ts). */
export type ComputeMatrix = Float32Array | PackedMatrix;

type MatrixKey = 'q' | 'k' | 'v' | 'o' | 'gate' | 'up' | 'down';

export type ComputeLayer = Omit<LayerWeights, MatrixKey> & Record<MatrixKey, ComputeMatrix>;

/**
 * The decoder as the CPU reads it: DecoderWeights itself, or packed weights whose matrices
 * stay packed (`packedViews`).
 */
export interface ComputeWeights {
  embed: ComputeMatrix;
  layers: ComputeLayer[];
  norm: Float32Array;
  lmHead: ComputeMatrix;
}

/** A packed matrix's f32 words as a Float32Array view; f16 and q4 ones as they are. */
function computeMatrix(m: PackedMatrix): ComputeMatrix {
  return m.format === 'f32' ? new Float32Array(m.data.buffer, m.data.byteOffset, m.data.length) : m;
}

/**
 * Packed weights as the CPU computes with them, with no copy: q, k and v are row ranges of
 * Wqkv, gate and up of the stacked gate_up (a row range of a packed matrix is a contiguous
 * run of its words), f32 matrices views of their words. Each product dequantises the rows
 * it reads as `unpackDecoderWeights` would have, so the results are the same bit for bit.
 */
export function packedViews(c: ModelConfig, p: PackedDecoderWeights): ComputeWeights {
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const layers = p.layers.map((l): ComputeLayer => {
    const out: ComputeLayer = {
      attnNorm: l.attnNorm,
      q: computeMatrix(sliceRows(l.qkv, 0, QD)),
      k: computeMatrix(sliceRows(l.qkv, QD, KVD)),
      v: computeMatrix(sliceRows(l.qkv, QD + KVD, KVD)),
      o: computeMatrix(l.o),
      mlpNorm: l.mlpNorm,
      gate: computeMatrix(sliceRows(l.gateUp, 0, I)),
      up: computeMatrix(sliceRows(l.gateUp, I, I)),
      down: computeMatrix(l.down),
    };
    if (l.qkvBias) {
      out.qBias = l.qkvBias.subarray(0, QD);
      out.kBias = l.qkvBias.subarray(QD, QD + KVD);
      out.vBias = l.qkvBias.subarray(QD + KVD);
    }
    return out;
  });
  const embed = computeMatrix(p.embed);
  const lmHead = p.lmHead === p.embed ? embed : computeMatrix(p.lmHead);
  return { embed, layers, norm: p.norm, lmHead };
}

/** Every format some matrix is stored in (the pipelines the GPU compiles). */
export function packedFormats(p: PackedDecoderWeights): WeightFormat[] {
  const all = [p.embed, p.lmHead, ...p.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])].map((m) => m.format);
  return [...new Set(all)];
}

/** The weights both backends compute with when `format` is asked for (f32: the weights themselves). */
export function weightsInFormat(c: ModelConfig, w: DecoderWeights, format: WeightFormat): DecoderWeights {
  return format === 'f32' ? w : unpackDecoderWeights(c, packDecoderWeights(c, w, format));
}

export interface WeightBytes {
  /** Every decoder tensor as stored on the device (matrices packed, vectors f32). */
  total: number;
  /** Bytes per storage format actually used (fallbacks counted under their own format). */
  byFormat: Record<WeightFormat, number>;
  embed: number;
  lmHead: number;
}

function matrixBytes(format: WeightFormat, rows: number, cols: number): [WeightFormat, number] {
  const f = matrixFormat(format, cols);
  return [f, rows * rowBytes(f, cols)];
}

/**
 * The decoder's weight bytes in `format` from the config alone (for "will it fit?"
 * before any weights are read); `tied`: the head shares the embedding's table.
 */
export function decoderWeightBytes(c: ModelConfig, format: WeightFormat, tied = false): WeightBytes {
  const D = c.hiddenSize;
  const QD = c.numHeads * c.headDim;
  const KVD = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const byFormat: Record<WeightFormat, number> = { f32: 0, f16: 0, q4: 0 };
  const add = ([f, b]: [WeightFormat, number]) => {
    byFormat[f] += b;
    return b;
  };
  let total = 0;
  const perLayerVectors = 4 * (2 * D + (c.attentionBias ? QD + 2 * KVD : 0));
  for (let l = 0; l < c.numLayers; l++) {
    total += add(matrixBytes(format, QD + 2 * KVD, D)) + add(matrixBytes(format, D, QD));
    total += add(matrixBytes(format, 2 * I, D)) + add(matrixBytes(format, D, I));
    total += add(['f32', perLayerVectors]);
  }
  total += add(['f32', 4 * D]);
  const embed = add(matrixBytes(format, c.vocabSize, D));
  const lmHead = tied ? 0 : add(matrixBytes(format, c.vocabSize, D));
  total += embed + lmHead;
  return { total, byFormat, embed, lmHead };
}

/** The same count for weights already packed. */
export function packedWeightBytes(p: PackedDecoderWeights): WeightBytes {
  const byFormat: Record<WeightFormat, number> = { f32: 0, f16: 0, q4: 0 };
  const m = (x: PackedMatrix) => {
    const b = x.rows * rowBytes(x.format, x.cols);
    byFormat[x.format] += b;
    return b;
  };
  const v = (x: Float32Array | undefined) => {
    const b = x ? x.byteLength : 0;
    byFormat.f32 += b;
    return b;
  };
  let total = 0;
  for (const l of p.layers)
    total += v(l.attnNorm) + m(l.qkv) + v(l.qkvBias) + m(l.o) + v(l.mlpNorm) + m(l.gateUp) + m(l.down);
  total += v(p.norm);
  const embed = m(p.embed);
  const lmHead = p.lmHead === p.embed ? 0 : m(p.lmHead);
  total += embed + lmHead;
  return { total, byFormat, embed, lmHead };
}
