/**
 * docs/usage.md's option tables, rendered from the interfaces themselves (their properties,
 * types and doc comments, read by the TypeScript compiler): each table sits between
 * `<!-- options:NAME -->` and `<!-- /options -->`, so the reference cannot drift from the code.
 *   npx tsx scripts/option-docs.ts          rewrites docs/usage.md
 *   npx tsx scripts/option-docs.ts --check  exits 1 when docs/usage.md is not what it renders
 * A unit test (test/unit/docs.test.ts) checks the file holds what this renders now.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(fileURLToPath(import.meta.url), '..', '..');

/** The option interfaces a page passes, and the file that declares each. */
export const OPTION_TYPES = {
  LoadOptions: 'src/types.ts',
  TranscribeOptions: 'src/types.ts',
  RequestOptions: 'src/types.ts',
  RecordingOptions: 'src/types.ts',
  LiveOptions: 'src/transcribe/live.ts',
  CalibrateOptions: 'src/types.ts',
} as const;
export type OptionType = keyof typeof OPTION_TYPES;

const SECTION = /<!-- options:(\w+) -->\n[\s\S]*?<!-- \/options -->/g;

export interface OptionRow {
  name: string;
  optional: boolean;
  type: string;
  doc: string;
}

let program: ts.Program | undefined;

/** Every property of `name` (inherited ones included), its type as written for a reader, and its doc comment. */
export function optionRows(name: OptionType): OptionRow[] {
  program ??= ts.createProgram(
    [...new Set(Object.values(OPTION_TYPES))].map((f) => join(root, f)),
    { strict: true, target: ts.ScriptTarget.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler, noEmit: true },
  );
  const checker = program.getTypeChecker();
  const sf = program.getSourceFile(join(root, OPTION_TYPES[name]));
  if (!sf) throw new Error(`${OPTION_TYPES[name]} is not in the program`);
  const decl = sf.statements.find(
    (s): s is ts.InterfaceDeclaration | ts.TypeAliasDeclaration =>
      (ts.isInterfaceDeclaration(s) || ts.isTypeAliasDeclaration(s)) && s.name.text === name,
  );
  if (!decl) throw new Error(`${OPTION_TYPES[name]} declares no type ${name}`);
  const type = checker.getTypeAtLocation(decl.name);
  return checker.getPropertiesOfType(type).map((p) => {
    const at = p.valueDeclaration ?? p.declarations?.[0] ?? decl;
    const t = checker.getTypeOfSymbolAtLocation(p, at);
    const shown = checker
      .typeToString(checker.getNonNullableType(t), at, ts.TypeFormatFlags.NoTruncation)
      .replace(/import\("[^"]+"\)\./g, '');
    return {
      name: p.name,
      optional: (p.flags & ts.SymbolFlags.Optional) !== 0,
      type: shown,
      doc: ts.displayPartsToString(p.getDocumentationComment(checker)).replace(/\s+/g, ' ').trim(),
    };
  });
}

const cell = (s: string) => s.replaceAll('|', '\\|');

export function optionTable(name: OptionType): string {
  const rows = optionRows(name).map(
    (r) => `| \`${r.name}${r.optional ? '?' : ''}\` | \`${cell(r.type)}\` | ${cell(r.doc) || '—'} |`,
  );
  return ['| Option | Type | What it does |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The option types whose tables `doc` holds, in its order. */
export function optionSections(doc: string): string[] {
  return [...doc.matchAll(SECTION)].map((m) => m[1]);
}

/** `doc` with every option table between its markers rendered anew. */
export function renderOptionSections(doc: string): string {
  return doc.replace(SECTION, (_, name: string) => {
    if (!(name in OPTION_TYPES))
      throw new Error(`<!-- options:${name} --> names none of ${Object.keys(OPTION_TYPES).join(', ')}`);
    return `<!-- options:${name} -->\n${optionTable(name as OptionType)}\n<!-- /options -->`;
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = join(root, 'docs', 'usage.md');
  const doc = readFileSync(file, 'utf8');
  const rendered = renderOptionSections(doc);
  if (process.argv.includes('--check')) {
    if (rendered !== doc) {
      process.stderr.write(`${file}'s option tables differ from the code: run npx tsx scripts/option-docs.ts\n`);
      process.exit(1);
    }
    process.stdout.write(`${file}: option tables of ${optionSections(doc).join(', ')} up to date\n`);
  } else {
    writeFileSync(file, rendered);
    process.stdout.write(`${file}: option tables of ${optionSections(doc).join(', ')} rendered\n`);
  }
}
