/**
 * Reading model files from a URL (browser, or http in Node) or a filesystem path (Node),
 * with download progress where the transport reports it. Errors name the file.
 */
import { ModelLoadError } from '../errors.js';

export const isNode = (): boolean =>
  typeof process !== 'undefined' && !!process.versions?.node && typeof (globalThis as { window?: unknown }).window === 'undefined';

/**
 * Imports a Node builtin from a Node-only branch. The specifier is a variable so that a
 * browser bundle neither resolves nor warns about modules its code never loads.
 */
export function nodeBuiltin<T>(name: 'node:fs' | 'node:fs/promises' | 'node:module' | 'node:path' | 'node:url'): Promise<T> {
  return import(/* @vite-ignore */ name) as Promise<T>;
}

const isUrl = (s: string) => /^(https?|blob|data):/.test(s);

/** Joins a model folder (URL or path) and a file name. */
export function joinModelPath(base: string, name: string): string {
  return base.endsWith('/') ? base + name : `${base}/${name}`;
}

export async function readBytes(source: string, onProgress?: (loaded: number, total: number) => void): Promise<ArrayBuffer> {
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
      onProgress(loaded, total || loaded);
    }
    const out = new Uint8Array(loaded);
    let off = 0;
    for (const p of parts) {
      out.set(p, off);
      off += p.byteLength;
    }
    return out.buffer;
  } catch (e) {
    throw new ModelLoadError(source, `cannot read the file (${e instanceof Error ? e.message : String(e)})`);
  }
}

export async function readJson(source: string): Promise<unknown> {
  const bytes = await readBytes(source);
  const text = new TextDecoder().decode(bytes);
  // Dev servers (Vite) answer a missing file with their HTML page rather than a 404.
  if (/^\s*<(!doctype|html)/i.test(text)) throw new ModelLoadError(source, 'not found (the server answered with an HTML page); check the model URL');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(source, `not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** Whether a file exists (optional model files such as heads.json). */
export async function exists(source: string): Promise<boolean> {
  if (isNode() && !isUrl(source)) {
    const fs = await nodeBuiltin<typeof import('node:fs/promises')>('node:fs/promises');
    return fs.access(source.startsWith('file:') ? new URL(source) : source).then(() => true, () => false);
  }
  try {
    const res = await fetch(source, { method: 'HEAD' });
    return res.ok;
  } catch {
    return false;
  }
}
