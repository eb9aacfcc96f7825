/**
 * Runs fuzz cases `--from` .. `--to` (case seeds seed+from ..) in this process and writes
 * one JSON line per case start and end on stdout, so the parent (main.ts) can tell a hang
 * or a runaway process from a slow case and go on past it.
 */
import '../../src/platform/node-host.js';
import { removeTempDirs } from '../../test/helpers/temp.js';
import { disposeShared, runCase } from './cases.js';
import { makeBases } from './bases.js';

const arg = (name: string) => Number(process.argv[process.argv.indexOf(`--${name}`) + 1]);
const [seed, from, to] = [arg('seed'), arg('from'), arg('to')];

// A rejection nobody awaits is a crash of the library too: it reaches the parent as a line.
process.on('unhandledRejection', (e) => {
  process.stdout.write(`${JSON.stringify({ unhandled: String((e as Error)?.stack ?? e) })}\n`);
  process.exit(3);
});

const bases = await makeBases(`w${from}`);
try {
  for (let i = from; i < to; i++) {
    process.stdout.write(`${JSON.stringify({ start: i })}\n`);
    const v = await runCase(seed + i, bases);
    process.stdout.write(`${JSON.stringify({ done: i, rss: process.memoryUsage().rss, ...v })}\n`);
  }
} finally {
  disposeShared();
  removeTempDirs();
}
process.exit(0);
