/**
 * The ops that read weight matrices, per weight format (src/model/quant.ts): the
 * dense products (H4's matvec/matmul specialisations), the embedding gather and the
 * decode QKV projection + RoPE + append. The f32 set is the catalogue's own ops,
 * so the reference model's path is the one it always was; other formats are compiled
 * once per format the uploaded weights use (a q4 model whose K forbids q4 for a matrix
 * also uses the f16 set).
 */
import { WEIGHT_FORMAT_ID, type WeightFormat } from '../../model/quant.js';
import type { Kernels } from './kernels.js';
import type { Constants, PipelineCache } from '../../gpu/pipelines.js';
import { loadProductOps, type ProductOps } from './product-ops.js';
import { Embed } from './ops.js';
import { QkvRopeAppend } from './attention-ops.js';
import type { ModelConfig } from '../../model/config.js';

export interface WeightKernels extends ProductOps {
  embed: Embed;
  qkvRopeAppend: QkvRopeAppend;
}

export type WeightKernelsOf = (format: WeightFormat) => WeightKernels;

function catalogue(k: Kernels): WeightKernels {
  return { ...k.products, embed: k.embed, qkvRopeAppend: k.qkvRopeAppend };
}

async function compile(
  cache: PipelineCache,
  c: ModelConfig,
  modelConstants: Constants,
  format: WeightFormat,
): Promise<WeightKernels> {
  const constants = { ...modelConstants, WEIGHT_FORMAT: WEIGHT_FORMAT_ID[format] };
  const [dense, embed, qkvRopeAppend] = await Promise.all([
    loadProductOps(cache, format),
    cache.get('embed.wgsl', 'embed', constants),
    cache.get('qkv_rope.wgsl', 'qkv_rope_append', constants),
  ]);
  return {
    ...dense,
    embed: new Embed(cache.ctx, embed, c),
    qkvRopeAppend: new QkvRopeAppend(cache.ctx, qkvRopeAppend, `qkv_rope_append ${format}`, c),
  };
}

/**
 * The ops of every format in `formats`; asking for another one is a bug, said so.
 * `modelConstants` are the catalogue's (kernels.ts modelConstants), so every pipeline is
 * asked for at once, with the catalogue's, and a count of them is known from the start.
 */
export async function loadWeightKernels(
  cache: PipelineCache,
  c: ModelConfig,
  modelConstants: Constants,
  catalogueKernels: Promise<Kernels>,
  formats: Iterable<WeightFormat>,
): Promise<WeightKernelsOf> {
  const sets = new Map<WeightFormat, WeightKernels>();
  await Promise.all(
    [...new Set(formats)].map(async (f) =>
      sets.set(f, f === 'f32' ? catalogue(await catalogueKernels) : await compile(cache, c, modelConstants, f)),
    ),
  );
  return (format) => {
    const s = sets.get(format);
    if (!s)
      throw new Error(`no ${format} weight pipelines were compiled (the weights use ${[...sets.keys()].join(', ')})`);
    return s;
  };
}
