/**
 * The docs a user reads, held to the code: docs/usage.md's option tables are what the
 * interfaces render now, every error code has its row, the README stays a README (at most
 * 200 lines, no commit hashes), and every TypeScript block of README.md and docs/usage.md
 * compiles, strict, against the built package entries as a page would import them. (The CLI's
 * flag tables have their own test, cli-help.test.ts.)
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { OPTION_TYPES, optionRows, optionSections, renderOptionSections } from '../../scripts/option-docs.js';

const usage = readFileSync('docs/usage.md', 'utf8');
const readme = readFileSync('README.md', 'utf8');

/** The codes of `WnwErrorCode`, as src/errors.ts declares the union. */
function errorCodes(): string[] {
  const sf = ts.createSourceFile('errors.ts', readFileSync('src/errors.ts', 'utf8'), ts.ScriptTarget.Latest);
  const alias = sf.statements.find(
    (s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === 'WnwErrorCode',
  );
  if (!alias || !ts.isUnionTypeNode(alias.type)) throw new Error('src/errors.ts: WnwErrorCode is not a union');
  return alias.type.types.map((t) => {
    if (!ts.isLiteralTypeNode(t) || !ts.isStringLiteral(t.literal)) throw new Error('WnwErrorCode: not a string');
    return t.literal.text;
  });
}

/** The ```ts blocks of a markdown file, in order. */
const tsBlocks = (md: string) => [...md.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

describe('docs/usage.md', () => {
  it('holds a table of every option of every option type, as the interfaces render now', () => {
    expect(optionSections(usage).sort()).toEqual(Object.keys(OPTION_TYPES).sort());
    expect(renderOptionSections(usage), 'run npx tsx scripts/option-docs.ts').toBe(usage);
    for (const name of Object.keys(OPTION_TYPES) as (keyof typeof OPTION_TYPES)[]) {
      const rows = optionRows(name);
      expect(rows.length, name).toBeGreaterThan(2);
      for (const r of rows) expect(r.doc, `${name}.${r.name} has no doc comment`).not.toBe('');
    }
  });

  it('has a row for every error code, saying what to do', () => {
    const codes = errorCodes();
    expect(codes).toContain('MODEL_TOO_BIG');
    const rows = new Map(
      [...usage.matchAll(/^\| `([A-Z_]+)` \| ([^|]+) \| ([^|]+) \|$/gm)].map((m) => [m[1], m[3].trim()]),
    );
    for (const code of codes) expect(rows.get(code), `${code} in usage.md's error table`).toBeTruthy();
  });
});

describe('README.md', () => {
  it('is at most 200 lines, and neither it nor usage.md names a commit', () => {
    expect(readme.replace(/\n$/, '').split('\n').length).toBeLessThanOrEqual(200);
    // A commit hash: 7 to 40 hex digits with a digit and a letter in it.
    const hashes = (s: string) =>
      [...s.matchAll(/\b[0-9a-f]{7,40}\b/g)].map((m) => m[0]).filter((h) => /\d/.test(h) && /[a-f]/.test(h));
    expect(hashes(readme)).toEqual([]);
    expect(hashes(usage)).toEqual([]);
  });

  it('has the two set-up commands', () => {
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('npm ci && npm test');
  });
});

describe('the TypeScript examples of README.md and docs/usage.md', () => {
  const dir = join('.cache', 'doc-blocks');
  beforeAll(() => {
    execFileSync('npm', ['run', '--silent', 'build:lib'], { stdio: 'pipe', timeout: 300_000 });
  }, 300_000);

  it('compile, strict, against the built entries', () => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    // What the examples leave to the page around them.
    writeFileSync(
      join(dir, 'page.d.ts'),
      [
        'declare const file: File;',
        'declare const output: { append(text: string): void };',
        "declare const chart: { draw(s: import('wnw').StepStats): void };",
        'declare const signal: AbortSignal;',
        "declare const onProgress: (e: import('wnw').ProgressEvent) => void;",
        "declare const asr: import('wnw').Transcriber;",
        'declare const model: string;',
        'declare const samples: Float32Array;',
        'declare function show(committed: string, tentative: string): void;',
      ].join('\n'),
    );
    const files: string[] = [];
    for (const [doc, text] of [
      ['README', readme],
      ['usage', usage],
    ] as const)
      tsBlocks(text).forEach((code, i) => {
        const f = join(dir, `${doc}-${i + 1}.ts`);
        writeFileSync(f, `${code}\nexport {};\n`);
        files.push(f);
      });
    expect(files.length).toBeGreaterThanOrEqual(4);
    const lib = (f: string) => join(process.cwd(), 'dist', 'lib', f);
    const program = ts.createProgram([join(dir, 'page.d.ts'), ...files], {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
      types: ['@webgpu/types'],
      paths: {
        wnw: [lib('index.d.ts')],
        'wnw/research': [lib('research.d.ts')],
        'wnw/node': [lib('node.d.ts')],
      },
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(problems).toEqual([]);
  });
});
