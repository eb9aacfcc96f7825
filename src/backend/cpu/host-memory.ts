/**
 * The host memory a load may take, for the fit check of the CPU backend (whose weights and
 * KV live there): a figure the caller sets (the `hostMemoryBytes` load option, or
 * WNW_HOST_MEMORY_BYTES in the environment), else in Node what the system has available
 * (os.freemem(), which libuv takes from Linux's MemAvailable), bounded by the process's
 * cgroup where it has a limit (cgroup v2 memory.max less memory.current; v1
 * memory.limit_in_bytes less memory.usage_in_bytes): a container's limit is often far below
 * the machine's memory. A browser states nothing exact (its deviceMemory is judged in
 * webgpu/fit.ts): undefined there. node:os and node:fs are imported on demand only
 * (through the Node entry's host, platform/host.ts), so a browser bundle never loads them.
 */
import { WnwError } from '../../errors.js';
import { isNode, nodeHost } from '../../platform/host.js';

export const HOST_MEMORY_ENV = 'WNW_HOST_MEMORY_BYTES';

export interface HostMemory {
  bytes: number;
  /** Where the figure comes from, for the error that cites it. */
  source: string;
}

function processEnv(): Record<string, string | undefined> | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
}

/** A cgroup limit file's value: bytes, or undefined for none ("max", or v1's page-rounded 2^63). */
export function cgroupLimit(text: string): number | undefined {
  const t = text.trim();
  if (t === 'max' || !/^\d+$/.test(t)) return undefined;
  const n = Number(t);
  return n >= 2 ** 62 ? undefined : n;
}

const CGROUPS = [
  { limit: '/sys/fs/cgroup/memory.max', usage: '/sys/fs/cgroup/memory.current', name: 'cgroup memory.max' },
  {
    limit: '/sys/fs/cgroup/memory/memory.limit_in_bytes',
    usage: '/sys/fs/cgroup/memory/memory.usage_in_bytes',
    name: 'cgroup memory.limit_in_bytes',
  },
];

/**
 * The bytes this process may still take, and where the figure comes from; undefined where
 * nothing says (a browser, with neither an override nor a cgroup).
 */
export async function availableHostMemory(override?: number): Promise<HostMemory | undefined> {
  if (override !== undefined) return { bytes: override, source: 'the hostMemoryBytes option' };
  const env = processEnv()?.[HOST_MEMORY_ENV];
  if (env !== undefined && env !== '') {
    const n = Number(env);
    if (!(Number.isInteger(n) && n > 0))
      throw new WnwError(
        'BAD_ARGUMENT',
        `${HOST_MEMORY_ENV} must be a whole number of bytes above 0, got ${JSON.stringify(env)}`,
      );
    return { bytes: n, source: HOST_MEMORY_ENV };
  }
  if (!isNode()) return undefined;
  const { os, fs } = nodeHost('checking the host memory');
  let best: HostMemory = {
    bytes: os.freemem(),
    source: `the system's available memory (os.freemem(), of ${os.totalmem()} bytes)`,
  };
  for (const g of CGROUPS) {
    let limit: number | undefined;
    let used = 0;
    try {
      limit = cgroupLimit(fs.readFileSync(g.limit, 'utf8'));
      if (limit !== undefined) used = Number(fs.readFileSync(g.usage, 'utf8').trim()) || 0;
    } catch {
      continue; // no such cgroup file: this system has no limit there
    }
    if (limit === undefined) continue;
    const left = Math.max(0, limit - used);
    if (left < best.bytes) best = { bytes: left, source: `the ${g.name} limit (${limit} bytes, ${used} in use)` };
    break;
  }
  return best;
}
