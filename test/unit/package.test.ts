import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/** Every name a module exports (values and types), as its source declares them. */
function exportedNames(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const names: string[] = [];
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st) && st.exportClause && ts.isNamedExports(st.exportClause))
      for (const e of st.exportClause.elements) names.push(e.name.text);
    else if (ts.canHaveModifiers(st) && ts.getModifiers(st)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword))
      throw new Error(`${file}: declare in the modules and re-export from the entry (${st.getText(sf).slice(0, 40)})`);
  }
  return names;
}

describe('the entries', () => {
  it("the page's entry stays small (30 names at most, types included); research holds the rest, and neither repeats the other", () => {
    const page = exportedNames('src/index.ts');
    const research = exportedNames('src/research.ts');
    expect(page.length).toBeLessThanOrEqual(30);
    for (const name of [
      'loadTranscriber',
      'loadTranscriberInWorker',
      'WnwError',
      'toMono16k',
      'checkFit',
      'memoryNeed',
    ])
      expect(page).toContain(name);
    for (const name of [
      'WnwTranscriber',
      'KvPolicy',
      'PolicyLayout',
      'PrefillPlan',
      'StepPlan',
      'HeadsFile',
      'POLICIES',
    ])
      expect(research).toContain(name);
    for (const name of ['hasFixedBudget', 'needsHeads', 'policyBudget', 'Probe']) expect(research).toContain(name);
    expect(page.filter((n) => research.includes(n))).toEqual([]);
    expect(new Set([...page, ...research]).size).toBe(page.length + research.length);
  });
});

// `npm run build:lib` is what package.json's main/types/exports point into.
describe('the ES module build', () => {
  it('emits both entries and their type declarations, and no models or test audio', () => {
    execFileSync('npm', ['run', '--silent', 'build:lib'], { stdio: 'pipe', timeout: 300_000 });
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(existsSync(pkg.main)).toBe(true);
    expect(existsSync(pkg.types)).toBe(true);
    expect(Object.keys(pkg.exports)).toEqual(['.', './research']);
    expect(pkg.exports['.']).toEqual({
      types: './' + pkg.types.replace(/^\.\//, ''),
      import: './' + pkg.main.replace(/^\.\//, ''),
    });
    for (const entry of Object.values(pkg.exports) as { types: string; import: string }[]) {
      expect(existsSync(entry.import), entry.import).toBe(true);
      expect(existsSync(entry.types), entry.types).toBe(true);
    }
    const dts = readFileSync(pkg.types, 'utf8');
    for (const name of [
      'loadTranscriber',
      'TranscribeOptions',
      'TranscriptionResult',
      'loadTranscriberInWorker',
      'WnwError',
    ])
      expect(dts).toContain(name);
    const researchDts = readFileSync(pkg.exports['./research'].types, 'utf8');
    for (const name of ['WnwTranscriber', 'KvPolicy', 'Probe', 'POLICIES']) expect(researchDts).toContain(name);
    // The declarations' relative imports all land on emitted files.
    for (const f of [pkg.types, pkg.exports['./research'].types]) {
      for (const [, rel] of readFileSync(f, 'utf8').matchAll(/from '(\.[^']+)'/g))
        expect(existsSync(join('dist', 'lib', rel.replace(/\.js$/, '.d.ts'))), `${f}: ${rel}`).toBe(true);
    }
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
