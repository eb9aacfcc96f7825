/**
 * Renders docs/usage.md's flag tables from the CLI's flag table (src/cli/flags.ts), between
 * their `<!-- cli-flags:COMMAND -->` and `<!-- /cli-flags -->` markers.
 *   npx tsx scripts/cli-docs.ts          rewrites docs/usage.md
 *   npx tsx scripts/cli-docs.ts --check  exits 1 when docs/usage.md is not what it renders
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/cli/args.js';
import { flagSections, renderFlagSections } from '../src/cli/flag-docs.js';

const file = join(packageRoot(), 'docs', 'usage.md');
const check = process.argv.includes('--check');
const doc = readFileSync(file, 'utf8');
const rendered = renderFlagSections(doc);
const sections = flagSections(doc);
if (!sections.length) {
  process.stderr.write(`${file} has no <!-- cli-flags:COMMAND --> ... <!-- /cli-flags --> section\n`);
  process.exit(1);
}
if (check) {
  if (rendered !== doc) {
    process.stderr.write(`${file}'s flag tables differ from src/cli/flags.ts: run npx tsx scripts/cli-docs.ts\n`);
    process.exit(1);
  }
  process.stdout.write(`${file}: flag tables of ${sections.join(', ')} up to date\n`);
} else {
  writeFileSync(file, rendered);
  process.stdout.write(
    `${file}: ${rendered === doc ? 'already up to date' : 'rewrote'} the flag tables of ${sections.join(', ')}\n`,
  );
}
