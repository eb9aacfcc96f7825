/**
 * The released checkpoints' decoder shapes and random weights at those shapes, packed
 * tensor by tensor: what the shape and memory benches run, in Node and in a page alike.
 */
import type { ModelConfig } from '../model/config.js';
import { decoderTensorShapes } from '../model/config.js';
import { matrixFormat, packedDecoderFrom, concatRows, type PackedDecoderWeights } from '../model/packed-weights.js';
import { pack, type PackedMatrix, type WeightFormat } from '../model/quant.js';
import { randomArray, referenceConfig, rng } from '../model/testing.js';

/** Text-decoder shapes of the released checkpoints (docs: real-backbones.md). */
export const DECODER_SHAPES: Record<string, Partial<ModelConfig> & { totalLayers: number }> = {
  'voxtral-mini-3b': {
    name: 'voxtral-mini-3b-shape', vocabSize: 131072, hiddenSize: 3072, intermediateSize: 8192, totalLayers: 30,
    numHeads: 32, numKvHeads: 8, headDim: 128, ropeTheta: 1e8, rmsNormEps: 1e-5, maxPositions: 32768,
    tokens: { bos: 1, eos: 2, pad: 11 }, prefix: [1, 3, 25], instruction: [4, 34], stopTokens: [2], attentionBias: false,
  },
};

export function shapeConfig(shape: string, layers: number, base: Partial<ModelConfig> = DECODER_SHAPES[shape]): ModelConfig {
  const { totalLayers: _, ...overrides } = base as Partial<ModelConfig> & { totalLayers?: number };
  return referenceConfig({ ...overrides, numLayers: layers });
}

/** Random weights packed tensor by tensor (matrices in row blocks of at most 8,192 rows). */
export function randomPackedWeights(c: ModelConfig, format: WeightFormat, seed = 1): PackedDecoderWeights {
  const r = rng(seed);
  const shapes = decoderTensorShapes(c);
  return packedDecoderFrom(c, (name): PackedMatrix => {
    const shape = shapes.get(name);
    if (!shape) throw new RangeError(`no tensor ${name}`);
    if (shape.length === 1) {
      const v = name.endsWith('.bias') ? randomArray(shape[0], 0.5, r) : randomArray(shape[0], 0.1, r).map((x) => x + 1);
      return pack('f32', v, 1, shape[0]);
    }
    const [rows, cols] = shape;
    const f = matrixFormat(format, cols);
    const scale = name.startsWith('embed') ? 1 : Math.sqrt(3 / cols);
    const parts: PackedMatrix[] = [];
    for (let r0 = 0; r0 < rows; r0 += 8192) {
      const n = Math.min(8192, rows - r0);
      parts.push(pack(f, randomArray(n * cols, scale, r), n, cols));
    }
    return parts.length === 1 ? parts[0] : concatRows(name, parts);
  });
}
