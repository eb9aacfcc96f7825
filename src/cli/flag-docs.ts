/**
 * docs/usage.md's flag tables, rendered from the flag table (flags.ts): each sits between
 * `<!-- cli-flags:COMMAND -->` and `<!-- /cli-flags -->`, and `npx tsx scripts/cli-docs.ts`
 * rewrites what is between them. A unit test checks the file holds what this renders now.
 */
import { UsageError } from '../option-values.js';
import { COMMANDS, flagsOf, type Command } from './flags.js';

const SECTION = /<!-- cli-flags:([\w-]+) -->\n[\s\S]*?<!-- \/cli-flags -->/g;

/** A table cell as code: GitHub's tables need a pipe escaped even inside a code span. */
const code = (s: string) => `\`${s.replaceAll('|', '\\|')}\``;
const cell = (s: string) => s.replaceAll('|', '\\|');

/** A command's flags as a markdown table: flag, value, default, description. */
export function flagTable(command: Command): string {
  const rows = flagsOf(command).map((f) =>
    [
      code(`${f.short ? `-${f.short}, ` : ''}--${f.name}`),
      f.value !== undefined ? code(f.value) : '',
      f.default !== undefined ? cell(f.default) : '',
      cell(f.description),
    ].join(' | '),
  );
  return [
    '| Flag | Value | Default | What it does |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}

/** The commands whose tables `doc` holds, in its order. */
export function flagSections(doc: string): string[] {
  return [...doc.matchAll(SECTION)].map((m) => m[1]);
}

/** `doc` with every flag table between its markers rendered anew; an unknown command's marker is an error. */
export function renderFlagSections(doc: string): string {
  return doc.replace(SECTION, (_, name: string) => {
    if (!(COMMANDS as readonly string[]).includes(name))
      throw new UsageError(`<!-- cli-flags:${name} --> names no wnw command (one of ${COMMANDS.join(', ')})`);
    return `<!-- cli-flags:${name} -->\n${flagTable(name as Command)}\n<!-- /cli-flags -->`;
  });
}
