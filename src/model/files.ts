/**
 * Reading model files from a URL (browser, or http in Node), a filesystem path (Node), or
 * a folder of File objects the user picked (see local-folder.ts), with download progress
 * where the transport reports it. Errors name the file.
 */
import { CancelledError, ModelLoadError } from '../errors.js';
import { localFile, type LocalLookup } from './local-folder.js';

export const isNode = (): boolean =>
  typeof process !== 'undefined' &&
  !!process.versions?.node &&
  typeof (globalThis as { window?: unknown }).window === 'undefined';

/**
 * Imports a Node builtin from a Node-only branch. The specifier is a variable so that a
 * browser bundle neither resolves nor warns about modules its code never loads.
 */
export function nodeBuiltin<T>(
  name: 'node:fs' | 'node:fs/promises' | 'node:module' | 'node:os' | 'node:path' | 'node:url',
): Promise<T> {
  return import(/* @vite-ignore */ name) as Promise<T>;
}

const isUrl = (s: string) => /^(https?|blob|data):/.test(s);

/** Joins a model folder (URL or path) and a file name. */
export function joinModelPath(base: string, name: string): string {
  return base.endsWith('/') ? base + name : `${base}/${name}`;
}

/** The picked file behind `source`, or a ModelLoadError when the folder lacks it. */
function pickedOrFail(local: LocalLookup, source: string): Blob {
  if (!local.file)
    throw new ModelLoadError(
      source,
      `is not in the chosen folder (${local.folder}); choose the folder that holds config.json and the weights`,
    );
  return local.file;
}

export async function readBytes(
  source: string,
  onProgress?: (loaded: number, total: number) => void,
): Promise<ArrayBuffer> {
  const local = localFile(source);
  if (local) {
    const file = pickedOrFail(local, source);
    const bytes = await file.arrayBuffer().catch((e: unknown) => {
      throw new ModelLoadError(
        source,
        `cannot read the file (${e instanceof Error ? e.message : String(e)}); was it moved or changed on disk?`,
      );
    });
    local.counted(bytes.byteLength);
    onProgress?.(bytes.byteLength, bytes.byteLength);
    return bytes;
  }
  try {
    if (isNode() && !isUrl(source)) {
      const fs = await nodeBuiltin<typeof import('node:fs/promises')>('node:fs/promises');
      const buf = await fs.readFile(source.startsWith('file:') ? new URL(source) : source);
      onProgress?.(buf.byteLength, buf.byteLength);
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
    }
    const res = await fetch(source);
    if (!res.ok) throw new Error(`HTTP ${res.status} ${res.statusText}`);
    const total = Number(res.headers.get('content-length') ?? 0);
    if (!res.body || !onProgress) return await res.arrayBuffer();
    const reader = res.body.getReader();
    const parts: Uint8Array[] = [];
    let loaded = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      loaded += value.byteLength;
      try {
        onProgress(loaded, total || loaded);
      } catch (e) {
        // A cancel, said by the progress callback: stop the download too.
        void reader.cancel().catch(() => {});
        throw e;
      }
    }
    const out = new Uint8Array(loaded);
    let off = 0;
    for (const p of parts) {
      out.set(p, off);
      off += p.byteLength;
    }
    return out.buffer;
  } catch (e) {
    if (e instanceof CancelledError) throw e;
    throw new ModelLoadError(source, `cannot read the file (${e instanceof Error ? e.message : String(e)})`);
  }
}

export async function readJson(source: string): Promise<unknown> {
  const bytes = await readBytes(source);
  const text = new TextDecoder().decode(bytes);
  // Dev servers (Vite) answer a missing file with their HTML page rather than a 404.
  if (/^\s*<(!doctype|html)/i.test(text)) {
    throw new ModelLoadError(
      source,
      isUrl(source)
        ? 'not found (the server answered with an HTML page); check the model URL'
        : "is an HTML page, not JSON: replace it with the model's file",
    );
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(source, `not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** Whether a file exists (optional model files such as heads.json). */
export async function exists(source: string): Promise<boolean> {
  const local = localFile(source);
  if (local) return local.file !== null;
  if (isNode() && !isUrl(source)) {
    const fs = await nodeBuiltin<typeof import('node:fs/promises')>('node:fs/promises');
    return fs.access(source.startsWith('file:') ? new URL(source) : source).then(
      () => true,
      () => false,
    );
  }
  try {
    const res = await fetch(source, { method: 'HEAD' });
    // Dev servers (Vite) answer a missing file with their HTML page and status 200; no model file is HTML.
    return res.ok && !(res.headers.get('content-type') ?? '').includes('text/html');
  } catch {
    return false;
  }
}

/** A file read piece by piece (a checkpoint shard): its size, and byte ranges on demand. */
export interface RangedFile {
  readonly source: string;
  readonly size: number;
  /** Exactly `length` bytes from `offset`; fails naming the file when fewer arrive. */
  read(offset: number, length: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

/**
 * Opens a file for ranged reads without reading it whole: Node file-handle reads, or
 * HTTP `Range` requests (a server that ignores Range is streamed and only the range kept).
 * A missing file fails with ModelLoadError naming it.
 */
export async function openRanged(source: string): Promise<RangedFile> {
  const fail = (e: unknown): never => {
    throw e instanceof ModelLoadError
      ? e
      : new ModelLoadError(source, `cannot read the file (${e instanceof Error ? e.message : String(e)})`);
  };
  const local = localFile(source);
  if (local) return rangedBlob(source, pickedOrFail(local, source), local.counted);
  if (isNode() && !isUrl(source)) {
    const fs = await nodeBuiltin<typeof import('node:fs/promises')>('node:fs/promises');
    const handle = await fs.open(source.startsWith('file:') ? new URL(source) : source, 'r').catch(fail);
    const size = (await handle.stat().catch(fail)).size;
    return {
      source,
      size,
      async read(offset, length) {
        const out = new Uint8Array(length);
        let got = 0;
        while (got < length) {
          const { bytesRead } = await handle.read(out, got, length - got, offset + got).catch(fail);
          if (bytesRead === 0)
            throw new ModelLoadError(
              source,
              `ends at byte ${offset + got}, ${length - got} bytes short of the range ${offset}..${offset + length}: truncated`,
            );
          got += bytesRead;
        }
        return out;
      },
      close: () => handle.close(),
    };
  }
  const probe = await fetch(source, { headers: { Range: 'bytes=0-0' } }).catch(fail);
  if (!probe.ok) fail(new Error(`HTTP ${probe.status} ${probe.statusText}`));
  const range = /\/(\d+)\s*$/.exec(probe.headers.get('content-range') ?? '');
  const size = range ? Number(range[1]) : Number(probe.headers.get('content-length') ?? NaN);
  await probe.body?.cancel();
  if (!Number.isFinite(size)) fail(new Error('the server reports neither Content-Range nor Content-Length'));
  return {
    source,
    size,
    async read(offset, length) {
      if (length === 0) return new Uint8Array(0);
      const res = await fetch(source, { headers: { Range: `bytes=${offset}-${offset + length - 1}` } }).catch(fail);
      if (!res.ok) fail(new Error(`HTTP ${res.status} ${res.statusText}`));
      const out = res.status === 206 ? new Uint8Array(await res.arrayBuffer()) : await sliceStream(res, offset, length);
      if (out.byteLength !== length)
        throw new ModelLoadError(
          source,
          `range ${offset}..${offset + length} returned ${out.byteLength} bytes: truncated`,
        );
      return out;
    },
    close: async () => {},
  };
}

/** Ranged reads of a picked file: `slice` reads only the range, so a multi-GB shard is never read whole. */
function rangedBlob(source: string, blob: Blob, counted: (n: number) => void): RangedFile {
  return {
    source,
    size: blob.size,
    async read(offset, length) {
      if (offset < 0 || length < 0 || offset + length > blob.size) {
        throw new ModelLoadError(
          source,
          `ends at byte ${blob.size}, the range ${offset}..${offset + length} is outside it: truncated`,
        );
      }
      const bytes = new Uint8Array(
        await blob
          .slice(offset, offset + length)
          .arrayBuffer()
          .catch((e: unknown) => {
            throw new ModelLoadError(
              source,
              `cannot read the file (${e instanceof Error ? e.message : String(e)}); was it moved or changed on disk?`,
            );
          }),
      );
      if (bytes.byteLength !== length)
        throw new ModelLoadError(
          source,
          `range ${offset}..${offset + length} returned ${bytes.byteLength} bytes: the file changed on disk?`,
        );
      counted(length);
      return bytes;
    },
    close: async () => {},
  };
}

/** Keeps bytes [offset, offset + length) of a full-body response, dropping the rest as it streams. */
async function sliceStream(res: Response, offset: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  if (!res.body) return new Uint8Array(await res.arrayBuffer()).slice(offset, offset + length);
  const reader = res.body.getReader();
  let pos = 0;
  let got = 0;
  while (got < length) {
    const { done, value } = await reader.read();
    if (done) break;
    const from = Math.max(offset - pos, 0);
    const to = Math.min(value.byteLength, offset + length - pos);
    if (to > from) {
      out.set(value.subarray(from, to), pos + from - offset);
      got += to - from;
    }
    pos += value.byteLength;
  }
  await reader.cancel();
  return got === length ? out : out.subarray(0, got);
}
