/**
 * The released checkpoints' decoder shapes and random weights at those shapes, packed
 * tensor by tensor: what the shape and memory benches run, in Node and in a page alike.
 */
import type { ModelConfig } from '../model/config.js';
import { decoderTensorShapes } from '../model/config.js';
import { FAMILIES } from '../model/families/registry.js';
import { matrixFormat, packedDecoderFrom, concatRows, type PackedDecoderWeights } from '../model/packed-weights.js';
import { pack, type PackedMatrix } from '../model/quant.js';
import { randomArray, referenceConfig, rng } from '../model/testing.js';
import type { WeightFormat } from '../index.js';

/** Text-decoder shapes of the released checkpoints (docs: real-backbones.md), from the family records. */
export const DECODER_SHAPES: Record<string, Partial<ModelConfig> & { totalLayers: number }> = Object.fromEntries(
  FAMILIES.flatMap((f) =>
    f.shapes.decodeBench
      ? [[f.shapes.decodeBench.key, { ...f.shapes.decodeBench.config, totalLayers: f.shapes.decodeBench.totalLayers }]]
      : [],
  ),
);

export function shapeConfig(
  shape: string,
  layers: number,
  base: Partial<ModelConfig> = DECODER_SHAPES[shape],
): ModelConfig {
  const { totalLayers: _, ...overrides } = base as Partial<ModelConfig> & { totalLayers?: number };
  return referenceConfig({ ...overrides, numLayers: layers });
}

/**
 * Random weights packed tensor by tensor (matrices in row blocks of at most 8,192 rows).
 * `sharedEmbedding`: every embedding row adds this multiple of one shared random row, so
 * the hidden state, and every layer's queries, hardly change with the token fed.
 */
export function randomPackedWeights(
  c: ModelConfig,
  format: WeightFormat,
  seed = 1,
  sharedEmbedding = 0,
): PackedDecoderWeights {
  const r = rng(seed);
  const shared = sharedEmbedding ? randomArray(c.hiddenSize, sharedEmbedding, rng(seed + 1)) : null;
  const shapes = decoderTensorShapes(c);
  return packedDecoderFrom(c, (name): PackedMatrix => {
    const shape = shapes.get(name);
    if (!shape) throw new RangeError(`no tensor ${name}`);
    if (shape.length === 1) {
      const v = name.endsWith('.bias')
        ? randomArray(shape[0], 0.5, r)
        : randomArray(shape[0], 0.1, r).map((x) => x + 1);
      return pack('f32', v, 1, shape[0]);
    }
    const [rows, cols] = shape;
    const f = matrixFormat(format, cols);
    const scale = name.startsWith('embed') ? 1 : Math.sqrt(3 / cols);
    const parts: PackedMatrix[] = [];
    for (let r0 = 0; r0 < rows; r0 += 8192) {
      const n = Math.min(8192, rows - r0);
      const data = randomArray(n * cols, scale, r);
      if (shared && name.startsWith('embed')) for (let i = 0; i < data.length; i++) data[i] += shared[i % cols];
      parts.push(pack(f, data, n, cols));
    }
    return parts.length === 1 ? parts[0] : concatRows(name, parts);
  });
}
