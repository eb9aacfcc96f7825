/**
 * A browser cache of packed decoder weights (a Hugging Face folder loaded in f16 or q4,
 * packed at load or converted beforehand by `npx wnw convert`), in the origin private file
 * system (OPFS), so that the second load of the same folder reads the packed tensors from
 * disk instead of downloading (and converting) the shards again.
 *
 * An entry is keyed by the folder's identity and the weight format: the folder's URL (or
 * a picked folder's name) with each shard's size and last-modified time (HTTP
 * Last-Modified/ETag, or the picked File's lastModified) and the index's total_size; a
 * changed shard changes the key and the stale entry is simply never read again
 * (`clearWeightCache` removes them all). An entry is one directory: `weights.bin` (every
 * tensor's words, back to back) and `manifest.json`, written last, so an interrupted write
 * never reads as a hit. Where OPFS is missing (Node, older browsers) nothing is cached.
 */
import { isNode, joinModelPath, readJson } from './files.js';
import { localFolderFiles } from './local-folder.js';
import type { ModelConfig } from './config.js';
import type { PackedDecoderWeights, PackedLayer } from './packed-weights.js';
import { isWeightFormat } from './packed-weights.js';
import type { PackedMatrix, WeightFormat } from './quant.js';
import {
  streamMatrix,
  streamedMatrixBytes,
  type PackedWeightSource,
  type StreamedLayer,
  type StreamedMatrix,
} from './packed-source.js';
import { streamedBlob, type StreamOptions } from './stream-range.js';

const ROOT = 'wnw-weights';
const VERSION = 1;

interface StorageWithDirectory {
  getDirectory(): Promise<FileSystemDirectoryHandle>;
}

function storage(): StorageWithDirectory | null {
  if (isNode()) return null;
  const s = (globalThis as { navigator?: { storage?: Partial<StorageWithDirectory> } }).navigator?.storage;
  return typeof s?.getDirectory === 'function' ? (s as StorageWithDirectory) : null;
}

/** Whether this environment can cache packed weights (OPFS present). */
export function weightCacheAvailable(): boolean {
  return storage() !== null;
}

interface ManifestEntry {
  name: string;
  format: WeightFormat;
  rows: number;
  cols: number;
  offset: number;
  byteLength: number;
}

interface Manifest {
  version: number;
  key: string;
  format: WeightFormat;
  tied: boolean;
  entries: ManifestEntry[];
}

async function sha256Hex(s: string): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** The shard files a folder's weights live in (from the index, else the single file). */
async function shardFiles(base: string): Promise<{ shards: string[]; totalSize: unknown }> {
  const index = joinModelPath(base, 'model.safetensors.index.json');
  try {
    const j = (await readJson(index)) as { weight_map?: Record<string, string>; metadata?: { total_size?: unknown } };
    return {
      shards: [...new Set(Object.values(j.weight_map ?? {}))].sort(),
      totalSize: j.metadata?.total_size ?? null,
    };
  } catch {
    return { shards: ['model.safetensors'], totalSize: null };
  }
}

/**
 * What identifies a folder's weights, or null where nothing is cached (no OPFS, a
 * filesystem path, a shard whose identity cannot be told). Reads no shard bytes: picked
 * Files report size and lastModified, a server answers HEAD. The weights' entries and the
 * stored calibration (heads-store.ts) are both keyed by it.
 */
export async function folderIdentity(
  base: string,
): Promise<{ where: string; totalSize: unknown; shards: unknown[] } | null> {
  if (!storage()) return null;
  const { shards, totalSize } = await shardFiles(base);
  const picked = localFolderFiles(base);
  const parts: unknown[] = [];
  if (picked) {
    for (const s of shards) {
      const f = picked.files.get(s) as (Blob & { lastModified?: number }) | undefined;
      if (!f) return null;
      parts.push([s, f.size, f.lastModified ?? 0]);
    }
  } else if (/^https?:/.test(base) || /^\//.test(base)) {
    for (const s of shards) {
      const res = await fetch(joinModelPath(base, s), { method: 'HEAD' }).catch(() => null);
      if (!res?.ok) return null;
      const h = res.headers;
      parts.push([s, h.get('content-length'), h.get('last-modified'), h.get('etag')]);
    }
  } else {
    return null;
  }
  const where = picked
    ? `picked:${picked.name}`
    : new URL(base, (globalThis as { location?: { href: string } }).location?.href).href;
  return { where, totalSize, shards: parts };
}

/** The cache key of a folder's weights in `format`, or null where nothing is cached (see folderIdentity). */
export async function weightCacheKey(base: string, format: WeightFormat): Promise<string | null> {
  const id = await folderIdentity(base);
  return id
    ? JSON.stringify({ v: VERSION, where: id.where, format, totalSize: id.totalSize, shards: id.shards })
    : null;
}

/** The cache's root directory in OPFS, or null where there is none (or it cannot be opened). */
export async function cacheRoot(create: boolean): Promise<FileSystemDirectoryHandle | null> {
  const s = storage();
  if (!s) return null;
  try {
    return await (await s.getDirectory()).getDirectoryHandle(ROOT, { create });
  } catch {
    return null;
  }
}

/** A key as a file or directory name. */
export function keyName(key: string): Promise<string> {
  return sha256Hex(key);
}

function entriesOf(p: PackedDecoderWeights): [string, PackedMatrix][] {
  const vec = (v: Float32Array): PackedMatrix => ({
    format: 'f32',
    rows: 1,
    cols: v.length,
    data: new Uint32Array(v.buffer, v.byteOffset, v.length),
  });
  const out: [string, PackedMatrix][] = [
    ['embed', p.embed],
    ['norm', vec(p.norm)],
  ];
  if (p.lmHead !== p.embed) out.push(['lm_head', p.lmHead]);
  p.layers.forEach((l, i) => {
    out.push(
      [`${i}.attn_norm`, vec(l.attnNorm)],
      [`${i}.qkv`, l.qkv],
      [`${i}.o`, l.o],
      [`${i}.mlp_norm`, vec(l.mlpNorm)],
      [`${i}.gate_up`, l.gateUp],
      [`${i}.down`, l.down],
    );
    if (l.qkvBias) out.push([`${i}.qkv_bias`, vec(l.qkvBias)]);
  });
  return out;
}

async function entryDir(key: string, create: boolean): Promise<FileSystemDirectoryHandle | null> {
  const s = storage();
  if (!s) return null;
  try {
    const root = await (await s.getDirectory()).getDirectoryHandle(ROOT, { create });
    return await root.getDirectoryHandle(await sha256Hex(key), { create });
  } catch {
    return null;
  }
}

/** Stores packed weights under `key` (a failure, e.g. a full quota, leaves no entry and is not an error). */
export async function storeCachedWeights(key: string, p: PackedDecoderWeights): Promise<boolean> {
  const dir = await entryDir(key, true);
  if (!dir) return false;
  try {
    const entries: ManifestEntry[] = [];
    const bin = await (await dir.getFileHandle('weights.bin', { create: true })).createWritable();
    let offset = 0;
    try {
      for (const [name, m] of entriesOf(p)) {
        const bytes = new Uint8Array(m.data.buffer as ArrayBuffer, m.data.byteOffset, m.data.byteLength);
        await bin.write(bytes);
        entries.push({ name, format: m.format, rows: m.rows, cols: m.cols, offset, byteLength: bytes.byteLength });
        offset += bytes.byteLength;
      }
    } finally {
      await bin.close();
    }
    const manifest: Manifest = { version: VERSION, key, format: p.format, tied: p.lmHead === p.embed, entries };
    const w = await (await dir.getFileHandle('manifest.json', { create: true })).createWritable();
    await w.write(JSON.stringify(manifest));
    await w.close();
    return true;
  } catch {
    await removeEntry(key);
    return false;
  }
}

/** The weights cached under `key` for config `c`, or null (no entry, or one that does not fit the config). */
export async function readCachedWeights(key: string, c: ModelConfig): Promise<PackedDecoderWeights | null> {
  const dir = await entryDir(key, false);
  if (!dir) return null;
  try {
    const manifest = JSON.parse(await (await (await dir.getFileHandle('manifest.json')).getFile()).text()) as Manifest;
    if (manifest.version !== VERSION || manifest.key !== key || !isWeightFormat(manifest.format)) return null;
    const file = await (await dir.getFileHandle('weights.bin')).getFile();
    const got = new Map<string, PackedMatrix>();
    for (const e of manifest.entries) {
      if (e.offset + e.byteLength > file.size) return null;
      const data = new Uint32Array(await file.slice(e.offset, e.offset + e.byteLength).arrayBuffer());
      got.set(e.name, { format: e.format, rows: e.rows, cols: e.cols, data });
    }
    const mat = (name: string): PackedMatrix => {
      const m = got.get(name);
      if (!m) throw new RangeError(`cached weights lack ${name}`);
      return m;
    };
    const vec = (name: string): Float32Array => new Float32Array(mat(name).data.buffer);
    const D = c.hiddenSize;
    const layers = Array.from({ length: c.numLayers }, (_, i): PackedLayer => ({
      attnNorm: vec(`${i}.attn_norm`),
      qkv: mat(`${i}.qkv`),
      o: mat(`${i}.o`),
      mlpNorm: vec(`${i}.mlp_norm`),
      gateUp: mat(`${i}.gate_up`),
      down: mat(`${i}.down`),
      ...(c.attentionBias ? { qkvBias: vec(`${i}.qkv_bias`) } : {}),
    }));
    const embed = mat('embed');
    const lmHead = manifest.tied ? embed : mat('lm_head');
    if (embed.rows !== c.vocabSize || embed.cols !== D || layers.some((l) => l.qkv.cols !== D || l.down.rows !== D))
      return null;
    return { format: manifest.format, embed, layers, norm: vec('norm'), lmHead };
  } catch {
    return null;
  }
}

/** Whether the origin's storage quota has `bytes` to spare (true where the browser does not say). */
async function roomFor(bytes: number): Promise<boolean> {
  const est = (globalThis as { navigator?: { storage?: { estimate?: () => Promise<StorageEstimate> } } }).navigator
    ?.storage?.estimate;
  if (typeof est !== 'function') return true;
  try {
    const { quota, usage } = await est.call(navigator.storage);
    return quota === undefined || quota - (usage ?? 0) >= bytes;
  } catch {
    return true;
  }
}

/** An entry's manifest, or null where there is none that fits `key`. */
async function readManifest(dir: FileSystemDirectoryHandle, key: string): Promise<Manifest | null> {
  const manifest = JSON.parse(await (await (await dir.getFileHandle('manifest.json')).getFile()).text()) as Manifest;
  return manifest.version === VERSION && manifest.key === key && isWeightFormat(manifest.format) ? manifest : null;
}

/**
 * The weights cached under `key` for config `c` as a source to stream from
 * (src/model/packed-source.ts): the manifest is read, no tensor byte is; null where there is
 * no entry or it does not fit the config.
 */
export async function cachedWeightSource(key: string, c: ModelConfig): Promise<PackedWeightSource | null> {
  const dir = await entryDir(key, false);
  if (!dir) return null;
  try {
    const manifest = await readManifest(dir, key);
    if (!manifest) return null;
    const blob = await (await dir.getFileHandle('weights.bin')).getFile();
    const file = streamedBlob('weights.bin (the browser cache of packed weights)', blob);
    const got = new Map<string, StreamedMatrix>();
    for (const e of manifest.entries) {
      const m: StreamedMatrix = {
        format: e.format,
        rows: e.rows,
        cols: e.cols,
        ranges: [{ file, offset: e.offset, byteLength: e.byteLength, name: e.name }],
      };
      if (e.offset + e.byteLength > blob.size || streamedMatrixBytes(m) !== e.byteLength) return null;
      got.set(e.name, m);
    }
    const mat = (name: string): StreamedMatrix => {
      const m = got.get(name);
      if (!m) throw new RangeError(`cached weights lack ${name}`);
      return m;
    };
    const D = c.hiddenSize;
    const layers = Array.from({ length: c.numLayers }, (_, i): StreamedLayer => ({
      attnNorm: mat(`${i}.attn_norm`),
      qkv: mat(`${i}.qkv`),
      o: mat(`${i}.o`),
      mlpNorm: mat(`${i}.mlp_norm`),
      gateUp: mat(`${i}.gate_up`),
      down: mat(`${i}.down`),
      ...(c.attentionBias ? { qkvBias: mat(`${i}.qkv_bias`) } : {}),
    }));
    const embed = mat('embed');
    const lmHead = manifest.tied ? embed : mat('lm_head');
    if (embed.rows !== c.vocabSize || embed.cols !== D || layers.some((l) => l.qkv.cols !== D || l.down.rows !== D))
      return null;
    return {
      kind: 'packed-source',
      format: manifest.format,
      embed,
      layers,
      norm: mat('norm'),
      lmHead,
      where: 'the browser cache',
    };
  } catch {
    return null;
  }
}

function sourceEntries(s: PackedWeightSource): [string, StreamedMatrix][] {
  const out: [string, StreamedMatrix][] = [
    ['embed', s.embed],
    ['norm', s.norm],
  ];
  if (s.lmHead !== s.embed) out.push(['lm_head', s.lmHead]);
  s.layers.forEach((l, i) => {
    out.push(
      [`${i}.attn_norm`, l.attnNorm],
      [`${i}.qkv`, l.qkv],
      [`${i}.o`, l.o],
      [`${i}.mlp_norm`, l.mlpNorm],
      [`${i}.gate_up`, l.gateUp],
      [`${i}.down`, l.down],
    );
    if (l.qkvBias) out.push([`${i}.qkv_bias`, l.qkvBias]);
  });
  return out;
}

/**
 * Stores the weights of a source under `key`, streamed piece by piece from their files into
 * the entry (never held whole), with the same layout as storeCachedWeights. False where
 * nothing could be stored (no OPFS, a full quota: no entry is left); a read error of the
 * source, or a cancel, is thrown after the partial entry is removed.
 */
export async function storeCachedSource(
  key: string,
  s: PackedWeightSource,
  onBytes?: (loaded: number, total: number) => void,
  opts: StreamOptions = {},
): Promise<boolean> {
  const entries = sourceEntries(s);
  const total = entries.reduce((n, [, m]) => n + streamedMatrixBytes(m), 0);
  // Where the origin's quota cannot take the entry (a private window's is small), nothing is downloaded for it.
  if (!(await roomFor(total))) return false;
  const dir = await entryDir(key, true);
  if (!dir) return false;
  // A read of the source (or a cancel) is the caller's error; a failed write only means no entry.
  let sourceFailure: unknown = null;
  try {
    const manifestEntries: ManifestEntry[] = [];
    const bin = await (await dir.getFileHandle('weights.bin', { create: true })).createWritable();
    let offset = 0;
    let wrote = false;
    try {
      onBytes?.(0, total);
      for (const [name, m] of entries) {
        const byteLength = streamedMatrixBytes(m);
        let writeFailure: unknown = null;
        await streamMatrix(
          m,
          async (piece) => {
            await bin.write(piece).catch((e: unknown) => {
              writeFailure = e;
              throw e;
            });
            onBytes?.(offset + piece.byteLength, total);
            offset += piece.byteLength;
          },
          opts,
        ).catch((e: unknown) => {
          if (e !== writeFailure) sourceFailure = e;
          throw e;
        });
        manifestEntries.push({
          name,
          format: m.format,
          rows: m.rows,
          cols: m.cols,
          offset: offset - byteLength,
          byteLength,
        });
      }
      wrote = true;
    } finally {
      // A stream that failed is aborted, not closed (closing an errored stream throws over the failure).
      if (wrote) await bin.close();
      else await bin.abort().catch(() => {});
    }
    const manifest: Manifest = {
      version: VERSION,
      key,
      format: s.format,
      tied: s.lmHead === s.embed,
      entries: manifestEntries,
    };
    const w = await (await dir.getFileHandle('manifest.json', { create: true })).createWritable();
    await w.write(JSON.stringify(manifest));
    await w.close();
    return true;
  } catch (e) {
    await removeEntry(key);
    if (sourceFailure) throw e;
    return false;
  }
}

async function removeEntry(key: string): Promise<void> {
  const s = storage();
  if (!s) return;
  try {
    const root = await (await s.getDirectory()).getDirectoryHandle(ROOT);
    await root.removeEntry(await sha256Hex(key), { recursive: true });
  } catch {
    // Nothing to remove.
  }
}

/** Removes every cached packed model (OPFS), and the calibrations stored with them (heads-store.ts); a no-op where there is no OPFS. */
export async function clearWeightCache(): Promise<void> {
  const s = storage();
  if (!s) return;
  try {
    await (await s.getDirectory()).removeEntry(ROOT, { recursive: true });
  } catch {
    // No cache yet.
  }
}
