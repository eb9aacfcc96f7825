/**
 * `wnw convert HF_DIR OUT_DIR [--quant q4|f16|f32]`: packs a Hugging Face folder's decoder
 * once, so that loading it needs no conversion (layout: src/model/packed-folder.ts).
 * Streams tensor by tensor: a shard's header is computed from the plan first, then each
 * tensor is read, packed, written and dropped, so memory holds one tensor at a time.
 */
import { copyFile, mkdir, open, readdir, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { f16Bits } from '../model/f16.js';
import { decoderTensorShapes } from '../model/config.js';
import { isDecoderTensor, upstreamTensorName } from '../model/families/common.js';
import { FAMILIES } from '../model/families/registry.js';
import { HfCheckpoint, INDEX_FILE } from '../model/hf/checkpoint.js';
import { readHfConfig } from '../model/hf/load.js';
import { readJson } from '../model/files.js';
import type { Json } from '../model/families/types.js';
import { matrixFormat } from '../model/packed-weights.js';
import { PACKED_MARKER, PACKED_VERSION, type PackedEntry } from '../model/packed-folder.js';
import { Q4_GROUP, quantizeTensor, rowWords } from '../model/quant.js';
import { UsageError, commandArgs, parseWeightFormat } from './args.js';
import { usageLine } from './help.js';
import { ModelLoadError } from '../index.js';
import type { WeightFormat } from '../index.js';

export const CONVERT_USAGE = usageLine('convert');

export interface ConvertArgs {
  from: string;
  to: string;
  format: WeightFormat;
}

export function parseConvertArgs(argv: string[], cwd = process.cwd()): ConvertArgs {
  const { flags, positional } = commandArgs('convert', argv);
  if (positional.length !== 2) throw new UsageError(`expected HF_DIR and OUT_DIR, got ${positional.length} paths`);
  const format = flags.has('quant') ? parseWeightFormat(flags.get('quant')!) : 'q4';
  const [from, to] = positional.map((p) => resolve(cwd, p));
  if (from === to) throw new UsageError('OUT_DIR must differ from HF_DIR');
  return { from, to, format };
}

/** One tensor of the output: packed decoder tensors, or encoder tensors kept in their dtype. */
interface Planned {
  name: string;
  /** The upstream shape (what the checkpoint holds). */
  shape: number[];
  dtype: 'U32' | 'BF16' | 'F16' | 'F32';
  stored: number[];
  bytes: number;
  entry?: PackedEntry;
}

const ELEMENT: Record<string, number> = { U32: 4, F32: 4, BF16: 2, F16: 2 };

function planDecoder(name: string, shape: number[], target: WeightFormat): Planned {
  const [rows, cols] = shape.length === 2 ? shape : [1, shape.reduce((a, b) => a * b, 1)];
  const format = shape.length === 2 ? matrixFormat(target, cols) : 'f32';
  const words = rowWords(format, cols);
  return { name, shape, dtype: 'U32', stored: [rows, words], bytes: 4 * rows * words, entry: { format, shape } };
}

/** The tensor's bytes as stored: packed (decoder) or narrowed back to its dtype (exact: it was widened from it). */
function encode(p: Planned, values: Float32Array, target: WeightFormat, file: string): Uint8Array {
  if (p.entry) {
    const q = quantizeTensor(p.name, values, p.shape, target, file);
    if (q.format !== p.entry.format) throw new Error(`${p.name}: planned ${p.entry.format}, packed ${q.format}`);
    return new Uint8Array(q.data.buffer, q.data.byteOffset, q.data.byteLength);
  }
  if (p.dtype === 'F32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const out = new Uint16Array(values.length);
  if (p.dtype === 'BF16') {
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < out.length; i++) out[i] = bits[i] >>> 16;
  } else {
    for (let i = 0; i < out.length; i++) out[i] = f16Bits(values[i]);
  }
  return new Uint8Array(out.buffer);
}

function shardName(i: number, n: number): string {
  return `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;
}

/** safetensors header: 8-byte length, JSON padded with spaces so the data starts 8-byte aligned. */
function header(tensors: Planned[]): { bytes: Uint8Array; offsets: number[] } {
  const h: Record<string, unknown> = {};
  const metadata: Record<string, string> = { format: 'pt', 'wnw.layout': `packed-weights-v${PACKED_VERSION}` };
  const offsets: number[] = [];
  let off = 0;
  for (const t of tensors) {
    offsets.push(off);
    h[t.name] = { dtype: t.dtype, shape: t.stored, data_offsets: [off, off + t.bytes] };
    if (t.entry) metadata[t.name] = JSON.stringify(t.entry);
    off += t.bytes;
  }
  let json = JSON.stringify({ __metadata__: metadata, ...h });
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const body = new TextEncoder().encode(json);
  const bytes = new Uint8Array(8 + body.length);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(body.length), true);
  bytes.set(body, 8);
  return { bytes, offsets };
}

export interface ConvertReport {
  format: WeightFormat;
  shards: number;
  tensors: number;
  dropped: number;
  bytesIn: number;
  bytesOut: number;
  byFormat: Record<WeightFormat, number>;
}

/** Converts `from` into `to` (created; files there of the same names are replaced). */
export async function convertFolder(
  args: ConvertArgs,
  log: (line: string) => void = () => {},
  maxShardBytes = 2 ** 31,
): Promise<ConvertReport> {
  const { from, to, format } = args;
  const json = (await readJson(join(from, 'config.json'))) as Json;
  if (typeof json?.['model_type'] !== 'string')
    throw new ModelLoadError(
      join(from, 'config.json'),
      `has no model_type: wnw convert takes a Hugging Face folder (${FAMILIES.map((f) => f.modelType).join(', ')})`,
    );
  const info = await readHfConfig(from, json);
  const { family, config: c } = info;
  const ckpt = await HfCheckpoint.open(from);
  try {
    const shapes = decoderTensorShapes(c);
    const expected = new Map([...shapes].map(([internal, shape]) => [upstreamTensorName(family, internal), shape]));
    const plan: Planned[] = [];
    let dropped = 0;
    let bytesIn = 0;
    for (const [name, t] of ckpt.tensors) {
      if (isDecoderTensor(family, name)) {
        const shape = expected.get(name);
        if (!shape)
          throw new ModelLoadError(
            t.file,
            'the weights hold this decoder tensor but config.json does not describe it: config.json does not match the weights',
            name,
          );
        ckpt.check(name, shape);
        plan.push(planDecoder(name, shape, format));
      } else if (family.encoderPrefixes.some((p) => name.startsWith(p))) {
        const dtype = t.dtype;
        if (dtype !== 'BF16' && dtype !== 'F16' && dtype !== 'F32')
          throw new ModelLoadError(t.file, `dtype ${dtype} of an audio encoder tensor is not BF16, F16 or F32`, name);
        plan.push({ name, shape: t.shape, dtype, stored: t.shape, bytes: t.byteLength });
      } else {
        dropped++;
        continue;
      }
      bytesIn += t.byteLength;
    }
    for (const name of expected.keys()) {
      // A tied head is not stored; everything else must be.
      if (!ckpt.info(name) && name !== family.lmHead)
        throw new ModelLoadError(ckpt.listing, 'tensor is missing (does config.json match these weights?)', name);
    }
    // 4-byte tensors first, so every U32/F32 tensor starts 4-byte aligned in its shard.
    plan.sort((a, b) => ELEMENT[b.dtype] - ELEMENT[a.dtype]);
    const shards: Planned[][] = [[]];
    let size = 0;
    for (const p of plan) {
      if (size > 0 && size + p.bytes > maxShardBytes) {
        shards.push([]);
        size = 0;
      }
      shards[shards.length - 1].push(p);
      size += p.bytes;
    }
    await mkdir(to, { recursive: true });
    const weightMap: Record<string, string> = {};
    const byFormat: Record<WeightFormat, number> = { f32: 0, f16: 0, q4: 0 };
    let bytesOut = 0;
    for (let i = 0; i < shards.length; i++) {
      const file = shardName(i, shards.length);
      const { bytes } = header(shards[i]);
      const out = await open(join(to, file), 'w');
      try {
        await out.write(bytes);
        for (const p of shards[i]) {
          const data = encode(p, await ckpt.f32(p.name, p.shape), format, ckpt.info(p.name)!.file);
          if (data.byteLength !== p.bytes)
            throw new Error(`${p.name}: planned ${p.bytes} bytes, encoded ${data.byteLength}`);
          await out.write(data);
          weightMap[p.name] = file;
          bytesOut += p.bytes;
          if (p.entry) byFormat[p.entry.format] += p.bytes;
        }
      } finally {
        await out.close();
      }
      log(`wrote ${file} (${shards[i].length} tensors)`);
    }
    await writeFile(
      join(to, INDEX_FILE),
      JSON.stringify({ metadata: { total_size: bytesOut }, weight_map: weightMap }, null, 2),
    );
    // Everything else (config, tokenizer, preprocessor, generation config) as upstream wrote it.
    for (const f of await readdir(from)) {
      if (
        f.endsWith('.safetensors') ||
        f === INDEX_FILE ||
        f === PACKED_MARKER ||
        !(await stat(join(from, f))).isFile()
      )
        continue;
      await copyFile(join(from, f), join(to, f));
    }
    await writeFile(
      join(to, PACKED_MARKER),
      JSON.stringify({ format, version: PACKED_VERSION, groupSize: Q4_GROUP }, null, 2) + '\n',
    );
    return { format, shards: shards.length, tensors: plan.length, dropped, bytesIn, bytesOut, byFormat };
  } finally {
    await ckpt.close();
  }
}
