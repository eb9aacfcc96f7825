/**
 * Where WGSL sources come from. Under Vite (browser, harness pages, the library build)
 * `import.meta.glob` inlines every `shaders/*.wgsl` as a string at build time; under
 * plain Node (tsx, the CLI on a machine with a real GPU) that call does not exist, so
 * the files are read from the package's `shaders/` folder instead.
 */
import { nodeBuiltin } from '../model/files.js';

export type ShaderLoader = (file: string) => Promise<string>;

function bundled(): Record<string, string> | null {
  try {
    const files = import.meta.glob('../../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
    const out: Record<string, string> = {};
    for (const [path, src] of Object.entries(files)) out[path.slice(path.lastIndexOf('/') + 1)] = src;
    return out;
  } catch {
    return null; // not transformed by Vite: plain Node
  }
}

let cached: Record<string, string> | null | undefined;

/** The default loader: bundled sources when Vite inlined them, else the files on disk (Node). */
export const defaultShaderLoader: ShaderLoader = async (file) => {
  if (cached === undefined) cached = bundled();
  if (cached) {
    const src = cached[file];
    if (src === undefined) throw new Error(`shader ${file} is not in shaders/`);
    return src;
  }
  const { readFile } = await nodeBuiltin<typeof import('node:fs/promises')>('node:fs/promises');
  return readFile(new URL(`../../shaders/${file}`, import.meta.url), 'utf8');
};
