/**
 * The Whisper-family audio encoder on WebGPU (headless Chromium, SwiftShader here) against
 * its plain-TS reference: kernels at the real encoder's shapes, then whole encoders of
 * Voxtral, Qwen2-Audio and Qwen2.5-Omni (the Hugging Face miniatures, real speech features):
 * NMSE <= 1e-7 for the products (f32, f16 and q4 weights against TS on the same dequantised
 * weights), <= 1e-6 for attention and whole encoders.
 */
import { test, expect, type Page } from '@playwright/test';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureMiniatures } from '../test/helpers/miniatures.js';

interface CheckResult {
  name: string;
  pass: boolean;
  detail: string;
  ms: number;
}

const CHECKS = [
  'enc_linear_gelu_67x1280to5120',
  'enc_linear_acc_33x5120to1280',
  'enc_linear_gelu_f16_67x1280to5120',
  'enc_linear_acc_q4_33x5120to1280',
  'enc_conv1_conv2_237x128to1280_2s_windows',
  'enc_layernorm_avgpool_1500x1280',
  'enc_attention_20h_1500_frames',
  'enc_attention_20h_block_diagonal_2s',
  'enc_voxtral_32s',
  'enc_qwen2_audio_32s',
  'enc_qwen2_5_omni_32s',
  // Linear weights packed as part 1's formats, against TS on the same dequantised weights.
  'enc_voxtral_32s_q4',
  'enc_qwen2_5_omni_32s_f16',
];

test.describe.configure({ mode: 'serial' });
let page: Page;
test.beforeAll(async ({ browser }) => {
  page = await browser.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') console.log('[page]', m.text());
  });
  await page.goto('/e2e/harness/gpu-encoder.html');
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, {
    timeout: 120_000,
  });
  // The Hugging Face miniatures, served by Vite from the repository root.
  const url =
    '/' +
    relative(resolve(dirname(fileURLToPath(import.meta.url)), '..'), await ensureMiniatures())
      .split('\\')
      .join('/');
  await page.evaluate(
    (u) => (window as unknown as { wnwGpu: { setMiniatures(u: string): void } }).wnwGpu.setMiniatures(u),
    url,
  );
});
test.afterAll(async () => {
  await page?.close();
});
for (const name of CHECKS) {
  test(`encoder ${name}`, async () => {
    const r = await page.evaluate(
      (n) => (window as unknown as { wnwGpu: { run(n: string): Promise<CheckResult> } }).wnwGpu.run(n),
      name,
    );
    console.log(`${name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
    expect(r.pass, r.detail).toBe(true);
  });
}
