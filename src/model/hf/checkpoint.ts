/**
 * A Hugging Face safetensors checkpoint read without holding it: the index
 * (model.safetensors.index.json) or a single model.safetensors, then per shard the 8-byte
 * header length and the JSON header, then each tensor by its byte range when asked for.
 * Every inconsistency (missing or truncated shard, a tensor the index promises but the
 * shard lacks, bad offsets, an unreadable dtype) fails as ModelLoadError naming file and
 * tensor, before any tensor data is read.
 */
import { ModelLoadError } from '../../errors.js';
import { exists, joinModelPath, openRanged, readJson, type RangedFile } from '../files.js';
import { DTYPE_BYTES, isWeightDtype, widenInto, type WeightDtype } from './dtype.js';
import { refuseOverlaps } from '../safetensors.js';

export interface HfTensor {
  name: string;
  /** The shard's path or URL. */
  file: string;
  dtype: string;
  shape: number[];
  /** Absolute byte offset of the data in the shard, and its length. */
  offset: number;
  byteLength: number;
}

export const INDEX_FILE = 'model.safetensors.index.json';
export const SINGLE_FILE = 'model.safetensors';
/** Bytes read per request when widening a large tensor (bounds the transient memory). */
const CHUNK_BYTES = 16 << 20;
/** A header larger than this is not a safetensors header (upstream caps it at 100 MB). */
const MAX_HEADER = 100_000_000;

export class HfCheckpoint {
  private constructor(
    readonly base: string,
    /** The file that lists the tensors (the index, or the single shard). */
    readonly listing: string,
    readonly tensors: Map<string, HfTensor>,
    private readonly files: Map<string, RangedFile>,
  ) {}

  static async open(base: string): Promise<HfCheckpoint> {
    const indexPath = joinModelPath(base, INDEX_FILE);
    let shardOf: Map<string, string>;
    let listing: string;
    if (await exists(indexPath)) {
      listing = indexPath;
      shardOf = parseIndex(await readJson(indexPath), indexPath);
    } else {
      listing = joinModelPath(base, SINGLE_FILE);
      if (!(await exists(listing))) {
        throw new ModelLoadError(
          indexPath,
          `not found, and no ${SINGLE_FILE} either: this folder holds no safetensors weights`,
        );
      }
      shardOf = new Map();
    }
    const byShard = new Map<string, string[]>();
    for (const [name, shard] of shardOf) byShard.set(shard, [...(byShard.get(shard) ?? []), name]);
    if (shardOf.size === 0) byShard.set(SINGLE_FILE, []);
    const tensors = new Map<string, HfTensor>();
    const files = new Map<string, RangedFile>();
    try {
      for (const [shard, names] of byShard) {
        const path = joinModelPath(base, shard);
        if (!(await exists(path))) {
          throw new ModelLoadError(
            path,
            `is missing: ${listing} places ${names.length} tensors in it (e.g. ${names[0]}); download the folder again`,
            names[0],
          );
        }
        const file = await openRanged(path);
        files.set(path, file);
        const header = await readHeader(file);
        for (const name of names) {
          if (!header.has(name))
            throw new ModelLoadError(
              path,
              `${listing} places this tensor in ${shard}, whose header does not list it`,
              name,
            );
        }
        for (const [name, t] of header) {
          if (shardOf.size === 0 || shardOf.get(name) === shard) tensors.set(name, t);
        }
      }
    } catch (e) {
      await Promise.all([...files.values()].map((f) => f.close()));
      throw e;
    }
    return new HfCheckpoint(base, listing, tensors, files);
  }

  info(name: string): HfTensor | undefined {
    return this.tensors.get(name);
  }

  /** Checks dtype and shape without reading data (the whole plan is checked before any load). */
  check(name: string, shape: number[]): HfTensor {
    const t = this.tensors.get(name);
    if (!t) throw new ModelLoadError(this.listing, 'tensor is missing (does config.json match these weights?)', name);
    if (!isWeightDtype(t.dtype))
      throw new ModelLoadError(t.file, `dtype ${t.dtype} cannot be read as weights (BF16, F16 or F32)`, name);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new ModelLoadError(t.file, `shape [${t.shape}] does not match config.json, which implies [${shape}]`, name);
    }
    return t;
  }

  /** The tensor widened to f32, read in bounded chunks straight into the result. */
  async f32(name: string, shape: number[], onBytes?: (n: number) => void): Promise<Float32Array> {
    const t = this.check(name, shape);
    const dtype = t.dtype as WeightDtype; // check() admits weight dtypes only
    const file = this.files.get(t.file)!;
    const size = DTYPE_BYTES[dtype];
    const out = new Float32Array(t.byteLength / size);
    const step = Math.floor(CHUNK_BYTES / size) * size;
    for (let at = 0; at < t.byteLength; at += step) {
      const n = Math.min(step, t.byteLength - at);
      widenInto(dtype, await file.read(t.offset + at, n), out, at / size);
      onBytes?.(n);
    }
    for (let i = 0; i < out.length; i++) {
      if (!Number.isFinite(out[i])) throw new ModelLoadError(t.file, `non-finite value at element ${i}`, name);
    }
    return out;
  }

  async close(): Promise<void> {
    await Promise.all([...this.files.values()].map((f) => f.close()));
    this.files.clear();
  }
}

function parseIndex(json: unknown, file: string): Map<string, string> {
  const map = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map))
    throw new ModelLoadError(file, 'has no "weight_map" object');
  const out = new Map<string, string>();
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== 'string' || shard.includes('/') || shard.includes('\\'))
      throw new ModelLoadError(file, `weight_map entry is not a shard file name: ${JSON.stringify(shard)}`, name);
    out.set(name, shard);
  }
  if (out.size === 0) throw new ModelLoadError(file, '"weight_map" is empty');
  return out;
}

/** Reads a shard's header: 8-byte little-endian length, then JSON; checks every range against the file size. */
async function readHeader(file: RangedFile): Promise<Map<string, HfTensor>> {
  const path = file.source;
  if (file.size < 8)
    throw new ModelLoadError(path, `is ${file.size} bytes, too short for a safetensors header: truncated`);
  const n = Number(new DataView((await file.read(0, 8)).buffer).getBigUint64(0, true));
  if (n < 2 || n > MAX_HEADER || 8 + n > file.size) {
    throw new ModelLoadError(
      path,
      `header length ${n} does not fit the file (${file.size} bytes): truncated or not safetensors`,
    );
  }
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(await file.read(8, n)));
  } catch (e) {
    throw new ModelLoadError(path, `header is not valid JSON (${(e as Error).message})`);
  }
  const dataStart = 8 + n;
  const dataBytes = file.size - dataStart;
  const out = new Map<string, HfTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const t = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const [begin, end] = Array.isArray(t.data_offsets) ? (t.data_offsets as number[]) : [-1, -1];
    const shape = t.shape;
    if (typeof t.dtype !== 'string' || !Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw new ModelLoadError(path, 'header entry lacks a dtype or an integer shape', name);
    }
    if (!(Number.isInteger(begin) && Number.isInteger(end) && begin >= 0 && end >= begin))
      throw new ModelLoadError(path, 'bad data_offsets', name);
    if (end > dataBytes) {
      throw new ModelLoadError(
        path,
        `data ends at byte ${end} of the data section but the file holds ${dataBytes}: the shard is truncated; download it again`,
        name,
      );
    }
    const size = DTYPE_BYTES[t.dtype];
    if (size === undefined) throw new ModelLoadError(path, `unknown dtype ${t.dtype}`, name);
    const count = (shape as number[]).reduce((a, b) => a * b, 1);
    if (count * size !== end - begin)
      throw new ModelLoadError(
        path,
        `shape [${shape}] of ${t.dtype} needs ${count * size} bytes, its offsets span ${end - begin}`,
        name,
      );
    out.set(name, {
      name,
      file: path,
      dtype: t.dtype,
      shape: shape as number[],
      offset: dataStart + begin,
      byteLength: end - begin,
    });
  }
  refuseOverlaps(
    path,
    [...out.values()].map((t) => ({ name: t.name, begin: t.offset, end: t.offset + t.byteLength })),
  );
  return out;
}
