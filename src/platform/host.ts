/**
 * What only Node can do (disk files, Dawn, the wasm audio decoders, onnxruntime-web's Node
 * loading), reached through one object that the Node entry installs (`wnw/node`,
 * src/platform/node-host.ts). The page's entry (`wnw`) never imports a Node module, so a
 * web app's bundler finds none to resolve, warn about or ship; a Node script that forgot the
 * Node entry is told so by the first call that needs it, in a typed error.
 */
import type * as Ort from 'onnxruntime-web';
import { WnwError } from '../errors.js';

export interface NodeHost {
  readonly fs: typeof import('node:fs');
  readonly fsp: typeof import('node:fs/promises');
  readonly os: typeof import('node:os');
  /** The WebGPU of Dawn (the `webgpu` package), after a probe in a child process found a usable adapter. */
  gpu(): Promise<GPU>;
  /** onnxruntime-web set up to find its wasm files on disk, one thread. */
  ort(): Promise<typeof Ort>;
  /** MP3, FLAC, Ogg and M4A bytes as 16 kHz mono (src/audio/node-decode.ts). */
  decodeCompressed(bytes: Uint8Array, targetRate: number): Promise<Float32Array>;
}

let installed: NodeHost | undefined;

export function installNodeHost(host: NodeHost): void {
  installed = host;
}

/** True in Node (not in a browser or a worker, whatever globals a test defines). */
export function isNode(): boolean {
  const g = globalThis as { process?: { versions?: { node?: string } }; window?: unknown };
  return typeof g.process?.versions?.node === 'string' && typeof g.window === 'undefined';
}

/** The Node host, or a typed error naming what needed it and the import that provides it. */
export function nodeHost(what: string): NodeHost {
  if (installed) return installed;
  throw new WnwError(
    'BAD_ARGUMENT',
    `${what} in Node needs wnw's Node entry: import { loadTranscriber } from 'wnw/node' ` +
      `(or add import 'wnw/node' once, before the first load); the 'wnw' entry holds what a page or a worker runs`,
  );
}
