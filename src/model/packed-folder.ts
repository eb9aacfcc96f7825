/**
 * A Hugging Face folder whose decoder weights `npx wnw convert` has already packed in a
 * weight format (src/model/quant.ts), so it loads without conversion. Laid out as the
 * upstream folder (config, tokenizer and preprocessor files copied unchanged, sharded
 * safetensors with an index, the upstream tensor names), except:
 * - every decoder tensor is U32 [rows, rowWords] of packed words (a vector is one f32
 *   row), and the shard's `__metadata__` maps its name to `{"format", "shape"}` (the
 *   upstream shape) as a JSON string;
 * - the audio encoder's tensors keep their dtype (src/encoder reads them as upstream);
 * - tensors the runtime never loads (speech generator, vocoder) are left out;
 * - `wnw-weights.json` names the format and the layout version, so a loader knows the
 *   folder before opening a shard.
 */
import { ModelLoadError } from '../errors.js';
import { decoderTensorShapes, type ModelConfig } from './config.js';
import { upstreamTensorName } from './families/common.js';
import type { HfFamily } from './families/types.js';
import { exists, joinModelPath, openRanged, readJson, type RangedFile } from './files.js';
import { packedSourceFrom, streamedMatrix, type PackedWeightSource, type StreamedMatrix } from './packed-source.js';
import { streamedFile, type StreamedFile } from './stream-range.js';
import { packedDecoderFrom, type PackedDecoderWeights } from './packed-weights.js';
import { rowWords, type PackedMatrix, type WeightFormat } from './quant.js';
import { isWeightFormat } from './packed-weights.js';

export const PACKED_MARKER = 'wnw-weights.json';
export const PACKED_VERSION = 1;

export interface PackedMarker {
  format: WeightFormat;
  version: number;
  groupSize: number;
}

/** The folder's marker, or null for a folder of upstream weights. */
export async function readPackedMarker(base: string): Promise<PackedMarker | null> {
  const file = joinModelPath(base, PACKED_MARKER);
  if (!(await exists(file))) return null;
  const j = (await readJson(file)) as Partial<PackedMarker> | null;
  if (!j || !isWeightFormat(j.format) || j.version !== PACKED_VERSION) {
    throw new ModelLoadError(
      file,
      `is not a version ${PACKED_VERSION} packed-weights marker ({"format": "f32"|"f16"|"q4", "version": ${PACKED_VERSION}}); ` +
        'convert the folder again with npx wnw convert',
    );
  }
  return { format: j.format, version: j.version, groupSize: j.groupSize ?? 32 };
}

/** The safetensors metadata entry of a packed tensor. */
export interface PackedEntry {
  format: WeightFormat;
  shape: number[];
}

interface ShardTensor {
  dtype: string;
  shape: number[];
  offset: number;
  byteLength: number;
}

interface Shard {
  file: RangedFile;
  tensors: Map<string, ShardTensor>;
  metadata: Record<string, string>;
}

async function openShard(path: string): Promise<Shard> {
  const file = await openRanged(path);
  try {
    if (file.size < 8) throw new ModelLoadError(path, 'is too short for a safetensors header: truncated');
    const n = Number(new DataView((await file.read(0, 8)).buffer).getBigUint64(0, true));
    if (n < 2 || 8 + n > file.size)
      throw new ModelLoadError(path, `header length ${n} does not fit the file (${file.size} bytes): truncated`);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(new TextDecoder().decode(await file.read(8, n)));
    } catch (e) {
      throw new ModelLoadError(path, `header is not valid JSON (${(e as Error).message})`);
    }
    const tensors = new Map<string, ShardTensor>();
    for (const [name, v] of Object.entries(header)) {
      if (name === '__metadata__') continue;
      const t = v as { dtype: string; shape: number[]; data_offsets: [number, number] };
      const [b, e] = t.data_offsets ?? [0, -1];
      if (!(e >= b && 8 + n + e <= file.size))
        throw new ModelLoadError(path, `data ends past the file (${file.size} bytes): truncated`, name);
      tensors.set(name, { dtype: t.dtype, shape: t.shape, offset: 8 + n + b, byteLength: e - b });
    }
    return { file, tensors, metadata: (header['__metadata__'] ?? {}) as Record<string, string> };
  } catch (e) {
    await file.close();
    throw e;
  }
}

/** One packed tensor's shape and place in its shard, its metadata checked against the shape the config implies. */
function checkPacked(
  shard: Shard,
  name: string,
  expected: number[],
): { format: WeightFormat; rows: number; cols: number; t: ShardTensor } {
  const path = shard.file.source;
  const t = shard.tensors.get(name)!;
  let entry: PackedEntry;
  try {
    entry = JSON.parse(shard.metadata[name] ?? 'null') as PackedEntry;
  } catch {
    throw new ModelLoadError(path, 'its __metadata__ entry is not JSON', name);
  }
  if (!entry || !isWeightFormat(entry.format) || !Array.isArray(entry.shape))
    throw new ModelLoadError(path, 'has no {"format", "shape"} entry in __metadata__: not a converted tensor', name);
  if (entry.shape.join(',') !== expected.join(','))
    throw new ModelLoadError(
      path,
      `was converted from shape [${entry.shape}], config.json implies [${expected}]`,
      name,
    );
  const [rows, cols] = expected.length === 2 ? expected : [1, expected.reduce((a, b) => a * b, 1)];
  if (expected.length !== 2 && entry.format !== 'f32')
    throw new ModelLoadError(path, `is a vector stored as ${entry.format}; vectors are f32`, name);
  const words = rowWords(entry.format, cols);
  if (t.dtype !== 'U32' || t.shape.join(',') !== `${rows},${words}` || t.byteLength !== rows * words * 4) {
    throw new ModelLoadError(
      path,
      `is ${t.dtype} [${t.shape}], a ${entry.format} [${expected}] tensor is U32 [${rows}, ${words}]`,
      name,
    );
  }
  return { format: entry.format, rows, cols, t };
}

/** The matrices packedDecoderFrom stacks per layer: q/k/v into Wqkv, gate/up into gate_up. */
const STACKED = [
  ['q_proj.weight', 'k_proj.weight', 'v_proj.weight'],
  ['gate_proj.weight', 'up_proj.weight'],
];

/** Reads one packed tensor, checked as checkPacked checks it. */
async function readPacked(shard: Shard, name: string, expected: number[]): Promise<PackedMatrix> {
  const { format, rows, cols, t } = checkPacked(shard, name, expected);
  const bytes = await shard.file.read(t.offset, t.byteLength);
  const data = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  return { format, rows, cols, data };
}

/** Every decoder tensor of a converted folder, located in its shard (headers read, no tensor bytes). */
interface Located {
  located: Map<string, { shard: Shard; shape: number[] }>;
  /** The upstream name an internal tensor is read from (a tied head: the embedding's). */
  source: (internal: string) => string;
  tiedHead: boolean;
  total: number;
  close: () => Promise<void>;
}

async function locatePacked(base: string, family: HfFamily, c: ModelConfig, tiedEmbeddings: boolean): Promise<Located> {
  const indexFile = joinModelPath(base, 'model.safetensors.index.json');
  const single = joinModelPath(base, 'model.safetensors');
  const weightMap: Record<string, string> = (await exists(indexFile))
    ? (((await readJson(indexFile)) as { weight_map?: Record<string, string> }).weight_map ?? {})
    : {};
  const shards = new Map<string, Shard>();
  const close = async () => void (await Promise.all([...shards.values()].map((s) => s.file.close())));
  const shardOf = async (name: string): Promise<Shard | null> => {
    const file = weightMap[name] ?? (Object.keys(weightMap).length ? null : 'model.safetensors');
    if (!file) return null;
    let s = shards.get(file);
    if (!s) shards.set(file, (s = await openShard(file === 'model.safetensors' ? single : joinModelPath(base, file))));
    return s.tensors.has(name) ? s : null;
  };
  try {
    const shapes = decoderTensorShapes(c);
    const head = family.lmHead;
    const tiedHead = !(await shardOf(head)) && tiedEmbeddings;
    const source = (internal: string) =>
      internal === 'lm_head.weight' && tiedHead
        ? upstreamTensorName(family, 'embed_tokens.weight')
        : upstreamTensorName(family, internal);
    // Every tensor located first (shard headers only), so the progress knows its byte total.
    const located = new Map<string, { shard: Shard; shape: number[] }>();
    for (const [internal, shape] of shapes) {
      const name = source(internal);
      if (located.has(name)) continue;
      const shard = await shardOf(name);
      if (!shard)
        throw new ModelLoadError(indexFile, 'tensor is missing (does config.json match these weights?)', name);
      located.set(name, { shard, shape });
    }
    const total = [...located].reduce((n, [name, { shard }]) => n + shard.tensors.get(name)!.byteLength, 0);
    return { located, source, tiedHead, total, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * The decoder of a converted folder as a source to stream from (src/model/packed-source.ts):
 * every tensor located and checked against config.json (shape, format, dtype) from the
 * shard headers alone; no tensor byte is read.
 */
export async function packedFolderSource(
  base: string,
  family: HfFamily,
  c: ModelConfig,
  tiedEmbeddings: boolean,
): Promise<{ source: PackedWeightSource; tiedHead: boolean; fileBytes: number }> {
  const { located, source, tiedHead, total, close } = await locatePacked(base, family, c, tiedEmbeddings);
  try {
    const files = new Map<Shard, StreamedFile>();
    const got = new Map<string, StreamedMatrix>();
    for (const [name, { shard, shape }] of located) {
      const { format, rows, cols, t } = checkPacked(shard, name, shape);
      let file = files.get(shard);
      if (!file) files.set(shard, (file = streamedFile(shard.file.source)));
      got.set(name, streamedMatrix(format, rows, cols, { file, offset: t.offset, byteLength: t.byteLength, name }));
    }
    const where = [...new Set([...files.values()].map((f) => f.source))].join(', ');
    return { source: packedSourceFrom(c, where, (internal) => got.get(source(internal))!), tiedHead, fileBytes: total };
  } finally {
    await close();
  }
}

/**
 * The decoder of a converted folder, packed as stored: each tensor is checked against
 * config.json (shape, format, dtype) as it is read; nothing is dequantised.
 */
export async function loadPackedDecoder(
  base: string,
  family: HfFamily,
  c: ModelConfig,
  tiedEmbeddings: boolean,
  onProgress?: (fraction: number, detail: string, bytes: { loaded: number; total: number }) => void,
): Promise<{ packed: PackedDecoderWeights; tiedHead: boolean; fileBytes: number }> {
  const { located, source, tiedHead, total, close } = await locatePacked(base, family, c, tiedEmbeddings);
  try {
    const got = new Map<string, PackedMatrix>();
    let fileBytes = 0;
    const read = async (name: string): Promise<PackedMatrix> => {
      const { shard, shape } = located.get(name)!;
      const m = await readPacked(shard, name, shape);
      fileBytes += m.data.byteLength;
      onProgress?.(fileBytes / total, 'decoder weights (packed)', { loaded: fileBytes, total });
      return m;
    };
    // Wqkv and gate_up are filled as their parts are read, each part let go once copied in,
    // so packedDecoderFrom finds the parts adjacent and stacks them without a copy: the load
    // peaks at the packed weights plus one tensor, not plus every layer's stacks again.
    for (let l = 0; l < c.numLayers; l++) {
      for (const parts of STACKED) {
        const names = parts.map((p) => source(`layers.${l}.${p}`));
        const first = await read(names[0]);
        const words = rowWords(first.format, first.cols);
        const stack = new Uint32Array(names.reduce((n, name) => n + located.get(name)!.shape[0], 0) * words);
        let row = 0;
        for (let i = 0; i < names.length; i++) {
          const m = i === 0 ? first : await read(names[i]);
          // Parts that cannot stack stay apart (concatRows names the mismatch).
          if (m.format !== first.format || m.cols !== first.cols) {
            got.set(names[i], m);
            continue;
          }
          stack.set(m.data, row * words);
          got.set(names[i], { ...m, data: stack.subarray(row * words, (row + m.rows) * words) });
          row += m.rows;
        }
      }
    }
    for (const name of located.keys()) if (!got.has(name)) got.set(name, await read(name));
    const packed = packedDecoderFrom(c, (internal) => got.get(source(internal))!);
    return { packed, tiedHead, fileBytes };
  } finally {
    await close();
  }
}
