/**
 * Where WGSL sources come from. Under Vite (browser, harness pages, the library build)
 * `import.meta.glob` inlines every `shaders/*.wgsl` as a string at build time; under
 * plain Node (tsx, the CLI on a machine with a real GPU) that call does not exist, so
 * the files are read from the package's `shaders/` folder instead. A shader's
 * `//#include other.wgsl` lines are resolved through the same loader (`assembleShader`),
 * so code several kernels share (the weight-format readers) is written once.
 */
import { nodeHost } from '../platform/host.js';

export type ShaderLoader = (file: string) => Promise<string>;

function bundled(): Record<string, string> | null {
  try {
    const files = import.meta.glob('../../shaders/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<
      string,
      string
    >;
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
  // The base in a variable: a bundler would take `new URL(template, import.meta.url)` for assets
  // to emit, every shader a second time, for a branch that only runs unbundled.
  const here = import.meta.url;
  return nodeHost(`loading the shader ${file}`).fsp.readFile(new URL(`../../shaders/${file}`, here), 'utf8');
};

const INCLUDE = /^\/\/#include\s+(\S+\.wgsl)\s*$/;

/**
 * `file` with each `//#include name.wgsl` line replaced by that file's source, nested
 * includes alike; a file already included is not included again (WGSL allows no second
 * declaration of a name).
 */
export async function assembleShader(file: string, load: ShaderLoader): Promise<string> {
  const seen = new Set<string>();
  const expand = async (name: string): Promise<string> => {
    seen.add(name);
    const out: string[] = [];
    for (const line of (await load(name)).split('\n')) {
      const inc = INCLUDE.exec(line.trim())?.[1];
      if (inc === undefined) out.push(line);
      else if (!seen.has(inc)) out.push(await expand(inc));
    }
    return out.join('\n');
  };
  return expand(file);
}
