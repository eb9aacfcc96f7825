/**
 * Every WGSL kernel against its plain-TS reference (src/backend/cpu/ops.ts) in headless
 * Chromium on WebGPU (SwiftShader here), at shipped scale: > 4,000 positions, many pages,
 * per-head page tables that differ and are not contiguous, split-K boundaries, EMPTY slots.
 * NMSE bounds as llama.cpp's: 1e-7 for f32 matmuls, 5e-4 for attention.
 */
import { test, expect, type Page } from '@playwright/test';

const CHECKS = [
  'matvec_lm_head', 'matvec_add_o_proj', 'matvec_add_down', 'matvec_swiglu',
  'matmul_qkv', 'matmul_add_down', 'rmsnorm', 'swiglu', 'embed', 'argmax',
  'rope_split', 'qkv_rope_append', 'kv_gather', 'paged_decode_attention', 'causal_prefill_attention',
];

interface CheckResult { name: string; pass: boolean; detail: string; ms: number; nmse?: number; nonZero?: number }

test.describe.configure({ mode: 'serial' });

let page: Page;

test.beforeAll(async ({ browser }) => {
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.log('[page]', m.text()); });
  await page.goto('/e2e/harness/gpu.html');
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready', null, { timeout: 120_000 });
});

test.afterAll(async () => {
  await page?.close();
});

for (const name of CHECKS) {
  test(`kernel ${name}`, async () => {
    const r = await page.evaluate((n) => (window as unknown as { wnwGpu: { run(n: string): Promise<CheckResult> } }).wnwGpu.run(n), name);
    console.log(`${r.name}: ${r.pass ? 'ok' : 'FAIL'} ${r.detail} (${Math.round(r.ms)} ms)`);
    expect(r.pass, r.detail).toBe(true);
  });
}
