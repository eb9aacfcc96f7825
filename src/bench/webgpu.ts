/**
 * WebGPU rows of the benchmark: in Node through Dawn when a real GPU exists, else in
 * headless Chromium (SwiftShader: CPU numbers, labelled so). Fills in once the WebGPU
 * backend's bench entry exists; until then it says why it has no rows.
 */
import type { PolicyTiming } from './decode.js';

export interface GpuBenchOptions {
  modelDir: string;
  minutes: number[];
  steps: number;
  log: (s: string) => void;
}

export async function benchWebGpu(o: GpuBenchOptions): Promise<Array<PolicyTiming & { backend: string; minutes: number; audioTokens: number; msPerTokenVsFull: number }>> {
  o.log('bench: WebGPU rows are not measured yet (no WebGPU bench entry).');
  return [];
}
