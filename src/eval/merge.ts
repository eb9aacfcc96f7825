/**
 * `npm run eval:merge -- BASE.json UPDATE.json --out FILE.json [--doc [FILE]] [--block NAME] [--plot FILE.svg] [--base-command "npm run eval -- …"]`
 *
 * Puts UPDATE's runs (a re-run of some policies on the same clips) in place of BASE's for
 * the same policy, variant and budget, recomputes the summary, and writes the report, the
 * doc block (docs/evaluation.md unless --doc names another file) and the plot as `npm run eval` would. The table's caption names BASE's
 * command (from its meta, or --base-command for a report written before commands were
 * recorded) and says which rows were re-run, when and by what command.
 */
// Installs what only Node does (disk files, Dawn, the audio decoders): this module runs only in Node.
import '../platform/node-host.js';
import { readFile, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { UsageError, packageRoot, rejectUnknown, splitArgs } from '../cli/args.js';
import { DEFAULT_DOC, type EvalReport, docBlock, markdownTable, mergeReports, replaceDocBlock } from './report.js';
import { fidelityPlot } from './plot.js';

export const MERGE_USAGE =
  'usage: npm run eval:merge -- BASE.json UPDATE.json --out FILE.json [--doc [FILE]] [--block eval|NAME] ' +
  '[--plot FILE.svg] [--base-command "npm run eval -- …"]';

export async function main(argv = process.argv.slice(2), cwd = process.cwd()): Promise<number> {
  try {
    const i = argv.indexOf('--doc');
    const hasPath =
      i >= 0 && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--') && !argv[i + 1].endsWith('.json');
    const { flags, positional } = splitArgs(hasPath ? argv : argv.map((a) => (a === '--doc' ? '--doc=' : a)), []);
    rejectUnknown(flags, ['out', 'doc', 'block', 'plot', 'base-command']);
    if (positional.length !== 2) throw new UsageError('give the base report and the update, in that order');
    const out = flags.get('out');
    if (!out) throw new UsageError('--out FILE.json is required');
    const [base, update] = await Promise.all(
      positional.map(async (p) => JSON.parse(await readFile(resolve(cwd, p), 'utf8')) as EvalReport),
    );
    const merged = mergeReports(base, update);
    const command = base.meta?.command ?? flags.get('base-command');
    if (merged.meta && command) merged.meta.command = command;
    await writeFile(resolve(cwd, out), `${JSON.stringify(merged, null, 2)}\n`);
    process.stdout.write(`${markdownTable(merged.summary)}\n`);
    if (flags.get('plot'))
      await writeFile(
        resolve(cwd, flags.get('plot')!),
        fidelityPlot([{ title: merged.meta?.data ?? basename(out), summary: merged.summary }]),
      );
    if (flags.has('doc')) {
      if (!command) throw new UsageError(`${positional[0]} records no command: say what wrote it with --base-command`);
      const doc = resolve(cwd, flags.get('doc') || join(packageRoot(), DEFAULT_DOC));
      await writeFile(
        doc,
        replaceDocBlock(await readFile(doc, 'utf8'), docBlock(merged, command), flags.get('block') ?? 'eval'),
      );
    }
    return 0;
  } catch (e) {
    process.stderr.write(
      `eval:merge: ${e instanceof Error ? e.message : String(e)}\n${e instanceof UsageError ? `${MERGE_USAGE}\n` : ''}`,
    );
    return e instanceof UsageError ? 2 : 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  void main().then((code) => process.exit(code));
}
