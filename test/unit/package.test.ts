import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/** The built files `entry` reaches by its static and dynamic imports and its worker, and the packages it imports. */
function closure(entry: string): { files: string[]; code: string[]; bare: Set<string> } {
  const files: string[] = [];
  const code: string[] = [];
  const bare = new Set<string>();
  const visit = (f: string) => {
    if (files.includes(f)) return;
    files.push(f);
    const c = readFileSync(f, 'utf8');
    code.push(c);
    const specs = [
      ...c.matchAll(/^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*["']([^"']+)["']/gm),
      ...c.matchAll(/^\s*import\s*["']([^"']+)["']/gm),
      ...c.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g),
      ...c.matchAll(/new URL\("(\.\/[^"]+\.js)", import\.meta\.url\)/g),
    ].map((m) => m[1]);
    for (const s of specs) {
      if (s.startsWith('.')) visit(join(dirname(f), s));
      else bare.add(s);
    }
  };
  visit(entry);
  return { files, code, bare };
}

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
  it("the page's entry holds every name a page uses, live captions included; research holds the rest, and neither repeats the other", () => {
    const page = exportedNames('src/index.ts');
    const research = exportedNames('src/research.ts');
    for (const name of [
      'loadTranscriber',
      'loadTranscriberInWorker',
      'Transcriber',
      'Recording',
      'RequestOptions',
      'LiveRecording',
      'LiveOptions',
      'LiveResult',
      'LiveText',
      'ModelInfo',
      'KvPrecision',
      'WeightFormat',
      'WnwError',
      'toMono16k',
      'checkFit',
      'memoryNeed',
      'inspectModel',
      'ModelSummary',
      'FitOptions',
      'FitVerdict',
      'adapterLimits',
      'openLocalFolder',
      'HeadsFile',
      'Calibration',
      'CalibrationClip',
    ])
      expect(page).toContain(name);
    for (const name of [
      'WnwTranscriber',
      'loadWnwTranscriber',
      'KvPolicy',
      'PolicyLayout',
      'PrefillPlan',
      'StepPlan',
      'POLICIES',
    ])
      expect(research).toContain(name);
    for (const name of ['hasFixedBudget', 'needsHeads', 'policyBudget', 'Probe']) expect(research).toContain(name);
    for (const name of ['checkConfigFit', 'wer', 'siteClips']) expect(research).toContain(name);
    expect(page.filter((n) => research.includes(n))).toEqual([]);
    expect(new Set([...page, ...research]).size).toBe(page.length + research.length);
  });
});

// `npm run build:lib` is what package.json's main/types/exports point into.
describe('the ES module build', () => {
  it('emits every entry and its type declarations, and no models or test audio', () => {
    execFileSync('npm', ['run', '--silent', 'build:lib'], { stdio: 'pipe', timeout: 300_000 });
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(existsSync(pkg.main)).toBe(true);
    expect(existsSync(pkg.types)).toBe(true);
    expect(Object.keys(pkg.exports)).toEqual(['.', './research', './node', './package.json']);
    expect(pkg.exports['.']).toEqual({
      types: './' + pkg.types.replace(/^\.\//, ''),
      import: './' + pkg.main.replace(/^\.\//, ''),
    });
    const entries = Object.entries(pkg.exports)
      .filter(([k]) => k !== './package.json')
      .map(([, v]) => v);
    for (const entry of entries as { types: string; import: string }[]) {
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
    // The worker is an entry beside the chunk that starts it, by the pattern bundlers follow;
    // onnxruntime-web stays external (inlined, its two bundles are ~150 MB).
    expect(existsSync(join('dist', 'lib', 'worker.js'))).toBe(true);
    expect(existsSync(join('dist', 'lib', 'assets'))).toBe(false);
    const page = closure(join('dist', 'lib', 'wnw.js'));
    expect(page.files.map((f) => f.split('/').pop())).toContain('worker.js');
    expect(page.code.some((c) => c.includes('new Worker(new URL("./worker.js", import.meta.url)'))).toBe(true);
    // What a page's bundler follows from `wnw`: no Node module, no Dawn, no Redis client, no Node audio decoder.
    expect([...page.bare].sort()).toEqual(['onnxruntime-web/webgpu']);
    for (const c of page.code) expect(c).not.toMatch(/["']node:[a-z_/]+["']|bullmq|ioredis|mpg123-decoder/);
    expect(closure(join('dist', 'lib', 'node.js')).bare).toContain('onnxruntime-web');
  });
});
