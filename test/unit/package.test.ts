import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

// `npm run build:lib` is what package.json's main/types/exports point into.
describe('the ES module build', () => {
  it('emits the module and its type declarations, and no models or test audio', () => {
    execFileSync('npm', ['run', '--silent', 'build:lib'], { stdio: 'pipe', timeout: 300_000 });
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(existsSync(pkg.main)).toBe(true);
    expect(existsSync(pkg.types)).toBe(true);
    const dts = readFileSync(pkg.types, 'utf8');
    for (const name of [
      'loadTranscriber',
      'TranscribeOptions',
      'TranscriptionResult',
      'loadTranscriberInWorker',
      'WnwError',
    ])
      expect(dts).toContain(name);
    expect(readFileSync(join('dist', 'lib', 'types.d.ts'), 'utf8')).toMatch(/policyOptions\?:/);
    for (const d of ['models', 'test-sets', 'samples']) expect(existsSync(join('dist', 'lib', d))).toBe(false);
    // onnxruntime-web stays external in the worker chunk too (inlined, its two bundles are ~150 MB)
    const assets = join('dist', 'lib', 'assets');
    const workers = readdirSync(assets).filter((f) => f.startsWith('worker-'));
    expect(workers.length).toBeGreaterThan(0);
    for (const f of readdirSync(assets)) expect(statSync(join(assets, f)).size, f).toBeLessThan(2 ** 20);
    expect(
      workers.some((f) => /[`"']onnxruntime-web(\/webgpu)?[`"']/.test(readFileSync(join(assets, f), 'utf8'))),
    ).toBe(true);
  });
});
