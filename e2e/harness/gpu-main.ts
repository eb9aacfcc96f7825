/** Entry of gpu.html: exposes every GPU check to the Playwright specs as window.wnwGpu. */
import { denseTests } from './gpu-kernels.js';
import { attentionTests } from './gpu-attention.js';
import { decoderTests } from './gpu-decoder-cases.js';
import { hfTests } from './gpu-hf-cases.js';
import { weightKernelTests } from './gpu-weight-kernels.js';
import type { CheckResult } from './gpu-util.js';

const tests: Record<string, () => Promise<CheckResult>> = { ...denseTests, ...attentionTests, ...decoderTests, ...weightKernelTests, ...hfTests };

async function run(name: string): Promise<CheckResult> {
  const t = tests[name];
  if (!t) return { name, pass: false, detail: `no such check: ${name}`, ms: 0 };
  try {
    return await t();
  } catch (e) {
    const err = e as Error;
    return { name, pass: false, detail: `${err.name}: ${err.message}\n${err.stack ?? ''}`, ms: 0 };
  }
}

// Other engineers edit sources while tests run: take updates here instead of a full page
// reload, which would kill the running check.
import.meta.hot?.accept(() => {});

(window as unknown as { wnwGpu: unknown }).wnwGpu = { names: Object.keys(tests), run };
document.getElementById('status')!.textContent = 'ready';
