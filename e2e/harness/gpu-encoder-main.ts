/** Entry of gpu-encoder.html: exposes the audio encoder's GPU checks as window.wnwGpu. */
import { encoderTests, setMiniatures } from './gpu-encoder.js';
import type { CheckResult } from './gpu-util.js';

async function run(name: string): Promise<CheckResult> {
  const t = encoderTests[name];
  if (!t) return { name, pass: false, detail: `no such check: ${name}`, ms: 0 };
  try {
    return await t();
  } catch (e) {
    const err = e as Error;
    return { name, pass: false, detail: `${err.name}: ${err.message}\n${err.stack ?? ''}`, ms: 0 };
  }
}

import.meta.hot?.accept(() => {});

(window as unknown as { wnwGpu: unknown }).wnwGpu = { names: Object.keys(encoderTests), run, setMiniatures };
document.getElementById('status')!.textContent = 'ready';
