/**
 * A packed decoder described by where its bytes are, not by the bytes: each matrix (and
 * f32 vector, as one row) is a list of byte ranges in files, whose concatenation is the
 * matrix's words in the layout the backends use (src/model/packed-weights.ts). Q, K and V
 * stacked into Wqkv, or gate and up into one matrix, are their tensors' ranges one after
 * another: packed rows never depend on their neighbours, so stacking is concatenation and
 * the file's bytes are already the GPU's.
 *
 * The WebGPU upload streams these ranges piece by piece into buffers of each matrix's final
 * size (src/backend/webgpu/weights.ts), so the page holds no copy of the weights; the CPU
 * backend, which computes from memory, reads them whole (`readPackedSource`).
 */
import { ModelLoadError } from '../errors.js';
import type { ModelConfig } from './config.js';
import type { PackedDecoderWeights, PackedLayer, WeightBytes } from './packed-weights.js';
import { rowBytes, type PackedMatrix, type WeightFormat } from './quant.js';
import type { PieceSink, StreamOptions, StreamedFile } from './stream-range.js';

/** Bytes [offset, offset + byteLength) of `file`, which hold tensor `name`. */
export interface TensorBytes {
  file: StreamedFile;
  offset: number;
  byteLength: number;
  name: string;
}

export interface StreamedMatrix {
  format: WeightFormat;
  rows: number;
  cols: number;
  /** The matrix's words, in order: one range per stacked tensor. */
  ranges: TensorBytes[];
}

export interface StreamedLayer {
  attnNorm: StreamedMatrix;
  qkv: StreamedMatrix;
  /** q/k/v biases [QD + 2 KVD] as one f32 row, present iff config.attentionBias. */
  qkvBias?: StreamedMatrix;
  o: StreamedMatrix;
  mlpNorm: StreamedMatrix;
  gateUp: StreamedMatrix;
  down: StreamedMatrix;
}

export interface PackedWeightSource {
  kind: 'packed-source';
  format: WeightFormat;
  embed: StreamedMatrix;
  layers: StreamedLayer[];
  norm: StreamedMatrix;
  /** The same object as `embed` when the head is tied to the embedding. */
  lmHead: StreamedMatrix;
  /** Where the bytes are, for readouts ("model.safetensors", "the browser cache"). */
  where: string;
}

export function isPackedSource(w: unknown): w is PackedWeightSource {
  return typeof w === 'object' && w !== null && (w as { kind?: unknown }).kind === 'packed-source';
}

/** Bytes of a matrix's words. */
export function streamedMatrixBytes(m: StreamedMatrix): number {
  return m.rows * rowBytes(m.format, m.cols);
}

/** A single tensor's ranges as a matrix, its byte count checked against the shape. */
export function streamedMatrix(format: WeightFormat, rows: number, cols: number, t: TensorBytes): StreamedMatrix {
  const m = { format, rows, cols, ranges: [t] };
  if (t.byteLength !== streamedMatrixBytes(m))
    throw new ModelLoadError(
      t.file.source,
      `holds ${t.byteLength} bytes, a ${format} [${rows}, ${cols}] tensor is ${streamedMatrixBytes(m)}`,
      t.name,
    );
  return m;
}

/** Rows of matrices of one format and K, stacked (as packed-weights.concatRows stacks words). */
export function stackRows(name: string, parts: StreamedMatrix[]): StreamedMatrix {
  const { format, cols } = parts[0];
  const odd = parts.find((m) => m.format !== format || m.cols !== cols);
  if (odd)
    throw new RangeError(
      `${name}: cannot stack a ${odd.format} [${odd.rows}, ${odd.cols}] matrix under ${format} [*, ${cols}] ones`,
    );
  return { format, rows: parts.reduce((n, m) => n + m.rows, 0), cols, ranges: parts.flatMap((m) => m.ranges) };
}

/** f32 vectors concatenated into one row. */
function stackVectors(name: string, parts: StreamedMatrix[]): StreamedMatrix {
  for (const p of parts) if (p.format !== 'f32' || p.rows !== 1) throw new RangeError(`${name}: vectors are f32 rows`);
  return {
    format: 'f32',
    rows: 1,
    cols: parts.reduce((n, m) => n + m.cols, 0),
    ranges: parts.flatMap((m) => m.ranges),
  };
}

/**
 * A source from tensors located one by one (a converted folder): `get` gives the internal
 * name's matrix (vectors as one f32 row); a head that is the embedding's very object stays
 * shared. The same assembly as packed-weights.packedDecoderFrom.
 */
export function packedSourceFrom(
  c: ModelConfig,
  where: string,
  get: (internal: string) => StreamedMatrix,
): PackedWeightSource {
  const vec = (name: string): StreamedMatrix => {
    const m = get(name);
    if (m.format !== 'f32') throw new RangeError(`${name} is ${m.format}; vectors are f32`);
    return { ...m, rows: 1, cols: m.rows * m.cols };
  };
  const layers = Array.from({ length: c.numLayers }, (_, i): StreamedLayer => {
    const p = `layers.${i}.`;
    return {
      attnNorm: vec(p + 'attn_norm.weight'),
      qkv: stackRows(p + 'qkv', [get(p + 'q_proj.weight'), get(p + 'k_proj.weight'), get(p + 'v_proj.weight')]),
      ...(c.attentionBias
        ? {
            qkvBias: stackVectors(p + 'qkv_bias', [
              vec(p + 'q_proj.bias'),
              vec(p + 'k_proj.bias'),
              vec(p + 'v_proj.bias'),
            ]),
          }
        : {}),
      o: get(p + 'o_proj.weight'),
      mlpNorm: vec(p + 'mlp_norm.weight'),
      gateUp: stackRows(p + 'gate_up', [get(p + 'gate_proj.weight'), get(p + 'up_proj.weight')]),
      down: get(p + 'down_proj.weight'),
    };
  });
  const embed = get('embed_tokens.weight');
  const head = get('lm_head.weight');
  return {
    kind: 'packed-source',
    format: sourceFormat(embed, head, layers),
    embed,
    layers,
    norm: vec('norm.weight'),
    lmHead: head,
    where,
  };
}

function sourceFormat(embed: StreamedMatrix, head: StreamedMatrix, layers: StreamedLayer[]): WeightFormat {
  const formats = new Set(sourceMatrices({ embed, lmHead: head, layers }).map((m) => m.format));
  return formats.has('q4') ? 'q4' : formats.has('f16') ? 'f16' : 'f32';
}

function sourceMatrices(s: Pick<PackedWeightSource, 'embed' | 'lmHead' | 'layers'>): StreamedMatrix[] {
  return [s.embed, s.lmHead, ...s.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])];
}

/** Every format some matrix is stored in (the pipelines the GPU compiles). */
export function sourceFormats(s: PackedWeightSource): WeightFormat[] {
  return [...new Set(sourceMatrices(s).map((m) => m.format))];
}

/** The weights' bytes as packed-weights.packedWeightBytes counts them. */
export function sourceWeightBytes(s: PackedWeightSource): WeightBytes {
  const byFormat: Record<WeightFormat, number> = { f32: 0, f16: 0, q4: 0 };
  const m = (x: StreamedMatrix | undefined) => {
    if (!x) return 0;
    const b = streamedMatrixBytes(x);
    byFormat[x.format] += b;
    return b;
  };
  let total = 0;
  for (const l of s.layers)
    total += m(l.attnNorm) + m(l.qkv) + m(l.qkvBias) + m(l.o) + m(l.mlpNorm) + m(l.gateUp) + m(l.down);
  total += m(s.norm);
  const embed = m(s.embed);
  const lmHead = s.lmHead === s.embed ? 0 : m(s.lmHead);
  total += embed + lmHead;
  return { total, byFormat, embed, lmHead };
}

/** Streams a matrix's ranges one after another; `at` counts from the matrix's first byte. */
export async function streamMatrix(m: StreamedMatrix, sink: PieceSink, opts: StreamOptions = {}): Promise<void> {
  let base = 0;
  for (const r of m.ranges) {
    const b = base;
    await r.file.stream(r.offset, r.byteLength, (piece, at) => sink(piece, b + at), opts);
    base += r.byteLength;
  }
}

async function readMatrix(m: StreamedMatrix, opts: StreamOptions): Promise<PackedMatrix> {
  const bytes = new Uint8Array(streamedMatrixBytes(m));
  await streamMatrix(m, (piece, at) => void bytes.set(piece, at), opts);
  return { format: m.format, rows: m.rows, cols: m.cols, data: new Uint32Array(bytes.buffer) };
}

/** The weights in memory (the CPU backend's), read range by range. */
export async function readPackedSource(s: PackedWeightSource, opts: StreamOptions = {}): Promise<PackedDecoderWeights> {
  const vec = async (m: StreamedMatrix) => new Float32Array((await readMatrix(m, opts)).data.buffer);
  const layers: PackedLayer[] = [];
  for (const l of s.layers) {
    layers.push({
      attnNorm: await vec(l.attnNorm),
      qkv: await readMatrix(l.qkv, opts),
      ...(l.qkvBias ? { qkvBias: await vec(l.qkvBias) } : {}),
      o: await readMatrix(l.o, opts),
      mlpNorm: await vec(l.mlpNorm),
      gateUp: await readMatrix(l.gateUp, opts),
      down: await readMatrix(l.down, opts),
    });
  }
  const embed = await readMatrix(s.embed, opts);
  const lmHead = s.lmHead === s.embed ? embed : await readMatrix(s.lmHead, opts);
  return { format: s.format, embed, layers, norm: await vec(s.norm), lmHead };
}
