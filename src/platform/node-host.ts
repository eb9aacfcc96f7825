/**
 * The Node host (platform/host.ts), installed by importing this module: disk files, the
 * wasm audio decoders, onnxruntime-web with its wasm files found on disk, and Dawn.
 *
 * Dawn (the optional `webgpu` package) can die natively while it looks for an adapter (a
 * floating point exception, then a segmentation fault, on a machine whose only Vulkan
 * driver is a software one), and a native crash cannot be caught. So the adapter is first
 * asked for in a child process, and only an adapter that process saw, and that is not a
 * software rasteriser, is asked for in this one.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as Ort from 'onnxruntime-web';
import { NoWebGpuError } from '../errors.js';
import { describeAdapter } from '../gpu/device.js';
import { decodeCompressed } from '../audio/node-decode.js';
import { installNodeHost, type NodeHost } from './host.js';

/** What to do about WebGPU in Node, for every refusal below. */
const NODE_HELP =
  'In Node, WebGPU runs on Dawn (npm install webgpu) with a hardware GPU and its Vulkan, Metal or D3D12 driver; ' +
  'elsewhere use the CPU backend (--backend cpu, or backend: "cpu").';

/** The adapter a child process found: what describeAdapter reads. */
interface ProbedAdapter {
  vendor: string;
  architecture: string;
  description: string;
  isFallbackAdapter?: boolean;
}

/** Asks Dawn for an adapter in the child's process; prints what it found as one JSON line. */
const PROBE = `
const { create, globals } = await import(process.argv[1]);
Object.assign(globalThis, globals);
const adapter = await create([]).requestAdapter({ powerPreference: 'high-performance' });
const i = adapter?.info;
process.stdout.write(JSON.stringify(i ? { vendor: i.vendor, architecture: i.architecture, description: i.description, isFallbackAdapter: i.isFallbackAdapter } : null) + '\\n');
process.exit(0);
`;

const PROBE_TIMEOUT_MS = 30_000;

function resolveDawn(): string {
  try {
    return pathToFileURL(createRequire(import.meta.url).resolve('webgpu')).href;
  } catch {
    throw new NoWebGpuError('the `webgpu` package (Dawn) is not installed', NODE_HELP);
  }
}

async function probeAdapter(dawn: string): Promise<ProbedAdapter | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', PROBE, dawn], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.on(
      'error',
      (e) => (
        clearTimeout(timer),
        reject(new NoWebGpuError(`cannot start Node to probe Dawn (${e.message})`, NODE_HELP))
      ),
    );
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const tail = err.trim().split('\n').slice(-2).join(' ').slice(0, 300);
      if (signal)
        return reject(
          new NoWebGpuError(
            `Dawn stopped with ${signal} while looking for a GPU adapter${tail ? ` (${tail})` : ''}`,
            NODE_HELP,
          ),
        );
      if (code !== 0)
        return reject(
          new NoWebGpuError(
            `Dawn failed while looking for a GPU adapter (exit ${code}${tail ? `: ${tail}` : ''})`,
            NODE_HELP,
          ),
        );
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? 'null') as ProbedAdapter | null);
      } catch {
        reject(new NoWebGpuError(`Dawn's adapter probe printed no answer${tail ? ` (${tail})` : ''}`, NODE_HELP));
      }
    });
  });
}

let dawnGpu: Promise<GPU> | undefined;

async function openDawn(): Promise<GPU> {
  const dawn = resolveDawn();
  const probed = await probeAdapter(dawn);
  if (!probed) throw new NoWebGpuError('Dawn found no GPU adapter', NODE_HELP);
  const { software, name } = describeAdapter({ info: probed } as unknown as GPUAdapter);
  if (software)
    throw new NoWebGpuError(`Dawn found only a software adapter (${name}), which it does not run reliably`, NODE_HELP);
  const mod = (await import(dawn)) as { create(o: string[]): GPU; globals: object };
  Object.assign(globalThis, mod.globals);
  return mod.create([]);
}

let ort: Promise<typeof Ort> | undefined;

async function loadOrt(): Promise<typeof Ort> {
  const mod: typeof Ort = await import('onnxruntime-web');
  // The package's node entry lives in dist/, next to the .wasm and .mjs loaders ORT fetches.
  const entry = createRequire(import.meta.url).resolve('onnxruntime-web');
  mod.env.wasm.wasmPaths = pathToFileURL(dirname(entry)).href + '/';
  // Threads in Node need worker files ORT cannot always locate; one thread is reliable.
  mod.env.wasm.numThreads = 1;
  return mod;
}

export const nodeHost: NodeHost = {
  fs,
  fsp,
  os,
  // Asked once a process: a probe costs a Node start, and its answer does not change.
  gpu: () => (dawnGpu ??= openDawn()),
  ort: () => (ort ??= loadOrt()),
  decodeCompressed,
};

installNodeHost(nodeHost);
