import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const UI = 'src/ui';
/** The package's entries as the demo reaches them: `wnw` and `wnw/research`. */
const ENTRIES = new Set(['../index.js', '../research.js']);

/** Every module specifier a file names: imports, re-exports and dynamic `import()`, types included. */
function specifiers(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (n: ts.Node) => {
    if (
      (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
      n.moduleSpecifier &&
      ts.isStringLiteral(n.moduleSpecifier)
    )
      found.push(n.moduleSpecifier.text);
    else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = n.arguments;
      // A computed specifier could name any module: the rule could not be checked.
      found.push(arg && ts.isStringLiteralLike(arg) ? arg.text : `<computed: ${arg?.getText(sf)}>`);
    } else if (ts.isImportTypeNode(n) && ts.isLiteralTypeNode(n.argument) && ts.isStringLiteral(n.argument.literal))
      found.push(n.argument.literal.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** Why `spec` is not one the demo may import, or null: the entries, its own files, or a package. */
function refusal(spec: string): string | null {
  if (ENTRIES.has(spec)) return null;
  if (/^\.\/[\w.-]+\.(js|css)$/.test(spec))
    return existsSync(join(UI, spec.replace(/\.js$/, '.ts'))) || existsSync(join(UI, spec))
      ? null
      : 'no such file in src/ui';
  if (!spec.startsWith('.') && !spec.startsWith('/') && !spec.startsWith('<')) return null;
  return "not the package's entries (wnw, wnw/research) or the demo's own files";
}

describe('the demo page (src/ui)', () => {
  const files = readdirSync(UI)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(UI, f));

  it('imports only wnw, wnw/research, its own files and packages, as any consumer would', () => {
    const bad = files.flatMap((f) =>
      specifiers(f).flatMap((s) => {
        const why = refusal(s);
        return why ? [`${f}: ${s} (${why})`] : [];
      }),
    );
    expect(bad).toEqual([]);
  });

  it('is read in full: static, type-only and lazy imports are all seen', () => {
    // What the rule above rests on: the parser finds each kind of import the demo uses.
    const main = specifiers(join(UI, 'main.ts'));
    expect(main).toContain('./app.js');
    expect(main.filter((s) => s === '../index.js').length).toBeGreaterThanOrEqual(2);
    expect(specifiers(join(UI, 'tide-chart.ts'))).toEqual(['../index.js']);
    for (const s of ['../model/loader.js', '../../src/errors.js', './missing.js', '/abs.js', '<computed: x>'])
      expect(refusal(s), s).not.toBeNull();
    for (const s of ['../index.js', '../research.js', './app.js', './style.css', 'vite', 'node:fs'])
      expect(refusal(s), s).toBeNull();
  });
});
