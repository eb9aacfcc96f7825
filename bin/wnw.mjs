#!/usr/bin/env node
// The installed package runs its built CLI (dist/lib/cli.js). A checkout of the repository,
// which has the TypeScript sources and no build, runs them through tsx (a devDependency), so a
// fresh clone works after `npm ci`; tsx's register() hooks only this process.
import { existsSync } from 'node:fs';

const sources = new URL('../src/cli/main.ts', import.meta.url);
let main;
if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import(sources.href));
} else {
  ({ main } = await import('../dist/lib/cli.js'));
}
const code = await main(process.argv.slice(2));
// Flush stdout before exiting: process.exit can cut off a large --json write to a pipe.
process.stdout.write('', () => process.exit(code));
